package nodeinstall

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodelabels"
)

// removeAgent is the teardown's second half: berth's agent labels every
// node (berth.dev/platform.*, berth.dev/tee, ...) and, left alone, those
// labels would outlive `helm uninstall`, still selecting nodes for
// RuntimeClasses that no longer exist. The agent cannot take them along
// when its pod stops: a pod also stops on an upgrade or a drain, where
// the labels must stay. So the teardown deletes the agent's DaemonSet
// itself, waits until no agent pod is left to apply them again, and then
// gives up the agent's labels with an empty server-side apply under the
// agent's field manager: exactly the labels only the agent set go, a
// label someone else also set stays theirs. Helm's own delete of the
// DaemonSet afterwards finds it gone, which it accepts.
func removeAgent(ctx context.Context, dyn dynamic.Interface, opt TeardownOptions) error {
	dsRes := dyn.Resource(daemonSetResource).Namespace(opt.Namespace)
	u, err := dsRes.Get(ctx, opt.AgentDaemonSet, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		opt.Log.Info("agent daemonset already gone", "daemonset", opt.Namespace+"/"+opt.AgentDaemonSet)
	case err != nil:
		return fmt.Errorf("reading daemonset %s/%s: %w", opt.Namespace, opt.AgentDaemonSet, err)
	default:
		uid := u.GetUID()
		bg := metav1.DeletePropagationBackground
		if err := dsRes.Delete(ctx, opt.AgentDaemonSet, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting the agent daemonset %s/%s: %w", opt.Namespace, opt.AgentDaemonSet, err)
		}
		opt.Log.Info("agent daemonset deleted; waiting for its pods to stop", "daemonset", opt.Namespace+"/"+opt.AgentDaemonSet)
		for {
			left, err := podsOwnedBy(ctx, dyn, opt.Namespace, string(uid))
			if err == nil && len(left) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("agent pods still running after %s: %v", opt.Timeout, left)
			case <-time.After(opt.Poll):
			}
		}
	}
	nl, err := dyn.Resource(nodesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	for _, item := range nl.Items {
		node := &corev1.Node{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, node); err != nil {
			return fmt.Errorf("decoding node %s: %w", item.GetName(), err)
		}
		if len(nodelabels.Owned(node, v1alpha1.FieldManager)) == 0 {
			continue
		}
		empty := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": node.Name},
		}}
		if _, err := dyn.Resource(nodesResource).Apply(ctx, node.Name, empty, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager, Force: true}); err != nil {
			return fmt.Errorf("removing the agent's labels from node %s: %w", node.Name, err)
		}
		opt.Log.Info("agent labels removed", "node", node.Name)
	}
	return nil
}

// podsOwnedBy lists the pods in namespace whose owner has uid.
func podsOwnedBy(ctx context.Context, dyn dynamic.Interface, namespace, uid string) ([]string, error) {
	pl, err := dyn.Resource(podsResource).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing pods in %s: %w", namespace, err)
	}
	var out []string
	for _, p := range pl.Items {
		if slices.ContainsFunc(p.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return string(o.UID) == uid }) {
			out = append(out, p.GetName())
		}
	}
	return out, nil
}
