package cri

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// NodeRuntimeHandlers returns the names in Node.status.runtimeHandlers of
// node, as the kubelet reports them from the runtime's CRI Status
// runtime_handlers (Kubernetes >= 1.30; empty for runtimes that do not
// report handlers, such as containerd 1.x). kubeconfig is a file path.
// The Node is read through the dynamic client: the typed clientset would
// register every API group when any berth command starts.
func NodeRuntimeHandlers(ctx context.Context, kubeconfig, node string) ([]string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	n, err := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "nodes"}).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", node, err)
	}
	handlers, _, err := unstructured.NestedSlice(n.Object, "status", "runtimeHandlers")
	if err != nil {
		return nil, fmt.Errorf("reading node %s: status.runtimeHandlers: %w", node, err)
	}
	names := []string{}
	for _, h := range handlers {
		if m, ok := h.(map[string]any); ok {
			if name, ok := m["name"].(string); ok {
				names = append(names, name)
			}
		}
	}
	return names, nil
}
