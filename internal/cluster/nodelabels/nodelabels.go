// Package nodelabels holds what the agent and the node-installer share
// about the labels each of them publishes on its Node with server-side
// apply: which labels a field manager owns, and whether an apply would
// change anything. Both write only when the node differs, so that a quiet
// cluster sees no writes.
package nodelabels

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Owned returns the labels that manager's applies own on node (from its
// managedFields): those its next apply removes when it leaves them out.
func Owned(node *corev1.Node, manager string) map[string]bool {
	owned := map[string]bool{}
	for _, mf := range node.ManagedFields {
		if mf.Manager != manager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.FieldsV1 == nil {
			continue
		}
		var f struct {
			Metadata struct {
				Labels map[string]json.RawMessage `json:"f:labels"`
			} `json:"f:metadata"`
		}
		if err := json.Unmarshal(mf.FieldsV1.Raw, &f); err != nil {
			continue
		}
		for k := range f.Metadata.Labels {
			if name, ok := strings.CutPrefix(k, "f:"); ok {
				owned[name] = true
			}
		}
	}
	return owned
}

// Differ reports whether applying want would change the node's labels
// have: a wanted label is missing or has another value, or a label the
// manager owns (owned) and may set (own) is on the node but no longer
// wanted, so the apply would remove it.
func Differ(have, want map[string]string, owned map[string]bool, own func(string) bool) bool {
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			return true
		}
	}
	for k := range owned {
		if _, wanted := want[k]; wanted || !own(k) {
			continue
		}
		if _, on := have[k]; on {
			return true
		}
	}
	return false
}
