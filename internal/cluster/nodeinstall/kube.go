package nodeinstall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodelabels"
	"berth.dev/berth/internal/cluster/nodereport"
)

// The resources the installer touches, through the dynamic client as the
// agent does: the typed clientset would register every API group at
// start-up, which every berth-cluster command would pay for.
var (
	nodesResource     = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	eventsResource    = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	daemonSetResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	podsResource      = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// getNode reads the node and decodes it.
func (n *Installer) getNode(ctx context.Context) (*corev1.Node, error) {
	u, err := n.dyn.Resource(nodesResource).Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", n.cfg.NodeName, err)
	}
	node := &corev1.Node{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, node); err != nil {
		return nil, fmt.Errorf("decoding node %s: %w", n.cfg.NodeName, err)
	}
	return node, nil
}

// applyNode makes want the installer's labels on the node and status its
// InstallStatusAnnotation, with server-side apply under FieldManager: a
// label the installer set before and no longer wants is removed by leaving
// it out, and a label someone else also set (kata-deploy's, with the same
// value) stays theirs when the installer lets go of it. nil want keeps the
// labels the installer owns as they are (a failed run changes no label);
// nil status removes the record. A record equal to the node's but for its
// time keeps the node's, so a rerun with the same outcome writes nothing.
// It writes only when the node differs, and reports whether it wrote.
// These labels and this one annotation are all the installer writes on its
// Node (the admission policy allows it nothing else).
func (n *Installer) applyNode(ctx context.Context, want map[string]string, status *v1alpha1.InstallStatus) (bool, error) {
	node, err := n.getNode(ctx)
	if err != nil {
		return false, err
	}
	owned := nodelabels.Owned(node, n.cfg.fieldManager())
	if want == nil {
		want = map[string]string{}
		for k := range owned {
			if v, ok := node.Labels[k]; ok && IsOwnLabel(k) {
				want[k] = v
			}
		}
	}
	cur, had := node.Annotations[n.cfg.statusAnnotation()]
	record := ""
	if status != nil {
		if record, err = n.record(cur, *status); err != nil {
			return false, err
		}
	}
	if !nodelabels.Differ(node.Labels, want, owned, IsOwnLabel) && record == cur && (had || status == nil) {
		return false, nil
	}
	labels := make(map[string]any, len(want))
	for k, v := range want {
		labels[k] = v
	}
	meta := map[string]any{"name": n.cfg.NodeName}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if status != nil {
		meta["annotations"] = map[string]any{n.cfg.statusAnnotation(): record}
	}
	ac := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": meta}}
	if _, err := n.dyn.Resource(nodesResource).Apply(ctx, n.cfg.NodeName, ac, metav1.ApplyOptions{FieldManager: n.cfg.fieldManager(), Force: true}); err != nil {
		return false, fmt.Errorf("applying labels and install status to node %s: %w", n.cfg.NodeName, err)
	}
	n.cfg.Log.Info("node labels and install status applied", "node", n.cfg.NodeName, "labels", len(want), "status", status != nil)
	return true, nil
}

// record is the annotation value of status: cur, the node's, when it
// records the same outcome, so that its time stays the first run's.
func (n *Installer) record(cur string, status v1alpha1.InstallStatus) (string, error) {
	if have, err := nodereport.DecodeInstall(cur); err == nil {
		status.Time = have.Time
		if same, err := nodereport.EncodeInstall(status); err == nil && same == cur {
			return cur, nil
		}
	}
	status.Time = metav1.NewTime(n.cfg.Now())
	return nodereport.EncodeInstall(status)
}

// IsOwnLabel reports whether k is a label the installer may set.
func IsOwnLabel(k string) bool {
	return strings.HasPrefix(k, InstalledLabelPrefix) || k == KataDeployLabel
}

// OwnedLabels are the labels FieldManager's applies own on the node (from
// managedFields): those its next apply removes when it leaves them out.
func OwnedLabels(node *corev1.Node) map[string]bool { return nodelabels.Owned(node, FieldManager) }

// event records a Warning Event on the Node. Its name is derived from the
// node, reason, subject and message, so a restarted installer with the
// same news finds its Event already there and writes nothing (creating it
// again is refused as a duplicate), while new news is a new Event. The
// installer therefore needs only to create Events (no get, no update).
//
// Node Events follow the kubelet's convention (namespace default,
// involvedObject.uid the node's name), which is what `kubectl describe
// node` looks for.
func (n *Installer) event(ctx context.Context, reason, subject, msg string) error {
	node := n.cfg.NodeName
	sum := sha256.Sum256([]byte(reason + "\x00" + subject + "\x00" + msg))
	name := node
	if len(name) > 200 {
		name = name[:200]
	}
	name += ".berth-" + hex.EncodeToString(sum[:])[:16]
	now := metav1.NewTime(n.cfg.Now())
	ev := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault},
		InvolvedObject:      corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node, UID: types.UID(node)},
		Reason:              reason,
		Message:             msg,
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: FieldManager, Host: node},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "berth.dev/node-installer",
		ReportingInstance:   node,
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ev)
	if err != nil {
		return fmt.Errorf("encoding the Event: %w", err)
	}
	_, err = n.dyn.Resource(eventsResource).Namespace(metav1.NamespaceDefault).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("recording Event %s on node %s: %w", reason, node, err)
	}
	return nil
}
