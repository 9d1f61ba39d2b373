package cri

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// NodeRuntimeHandlers returns the names in Node.status.runtimeHandlers of
// node, as the kubelet reports them from the runtime's CRI Status
// runtime_handlers (Kubernetes >= 1.30; empty for runtimes that do not
// report handlers, such as containerd 1.x). kubeconfig is a file path.
func NodeRuntimeHandlers(ctx context.Context, kubeconfig, node string) ([]string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", node, err)
	}
	names := []string{}
	for _, h := range n.Status.RuntimeHandlers {
		names = append(names, h.Name)
	}
	return names, nil
}
