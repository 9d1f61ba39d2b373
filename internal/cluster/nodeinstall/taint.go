package nodeinstall

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
)

// ParseTaint parses a startup taint given as KEY[=VALUE]:EFFECT, as
// kubelet's --register-with-taints names one: KEY a qualified name, VALUE
// a label value and EFFECT NoSchedule, PreferNoSchedule or NoExecute.
func ParseTaint(s string) (corev1.Taint, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: expected KEY[=VALUE]:EFFECT", s)
	}
	kv, effect := s[:i], corev1.TaintEffect(s[i+1:])
	key, value, _ := strings.Cut(kv, "=")
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: key %q: %s", s, key, strings.Join(errs, "; "))
	}
	if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
		return corev1.Taint{}, fmt.Errorf("taint %q: value %q: %s", s, value, strings.Join(errs, "; "))
	}
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q: effect %q: expected NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	return corev1.Taint{Key: key, Value: value, Effect: effect}, nil
}

// StartupTaint is a taint the node-installer removes from its Node once
// every platform's handler is verified live.
type StartupTaint struct {
	// Taint is matched by key and effect, and by value when MatchValue.
	Taint      corev1.Taint
	MatchValue bool
	// AnyEffect matches the key whatever the effect and value, as
	// kata-deploy's bare-key startupTaints entries do.
	AnyEffect bool
}

// ParseStartupTaint parses --startup-taint: KEY[=VALUE]:EFFECT, where a
// value, when given, must match too, or a bare KEY, which matches that
// key's taints of any effect.
func ParseStartupTaint(s string) (*StartupTaint, error) {
	if !strings.ContainsAny(s, ":=") && s != "" {
		if errs := validation.IsQualifiedName(s); len(errs) > 0 {
			return nil, fmt.Errorf("taint %q: key %q: %s", s, s, strings.Join(errs, "; "))
		}
		return &StartupTaint{Taint: corev1.Taint{Key: s}, AnyEffect: true}, nil
	}
	t, err := ParseTaint(s)
	if err != nil {
		return nil, err
	}
	return &StartupTaint{Taint: t, MatchValue: strings.Contains(s[:strings.LastIndex(s, ":")], "=")}, nil
}

// String is the taint as ParseStartupTaint reads it.
func (st *StartupTaint) String() string {
	if st.AnyEffect {
		return st.Taint.Key
	}
	s := st.Taint.Key
	if st.MatchValue {
		s += "=" + st.Taint.Value
	}
	return s + ":" + string(st.Taint.Effect)
}

// matches reports whether t is the startup taint.
func (st *StartupTaint) matches(t corev1.Taint) bool {
	if st.AnyEffect {
		return t.Key == st.Taint.Key
	}
	return t.Key == st.Taint.Key && t.Effect == st.Taint.Effect && (!st.MatchValue || t.Value == st.Taint.Value)
}

// startupTaints are the configured startup taints, for logs and errors.
type startupTaints []*StartupTaint

func (l startupTaints) String() string {
	s := make([]string, len(l))
	for i, st := range l {
		s[i] = st.String()
	}
	return strings.Join(s, ", ")
}

func (l startupTaints) matches(t corev1.Taint) bool {
	for _, st := range l {
		if st.matches(t) {
			return true
		}
	}
	return false
}

// removeStartupTaint removes the configured startup taints from the node,
// and only them: a JSON merge patch of spec.taints without them, under the
// resourceVersion read (so a taint someone else added meanwhile is a
// conflict, retried on a fresh read, not lost). A node without the taints
// gets no write. It reports whether it wrote.
func (n *Installer) removeStartupTaint(ctx context.Context) (bool, error) {
	st := startupTaints(n.cfg.StartupTaints)
	if len(st) == 0 {
		return false, nil
	}
	wrote := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := n.getNode(ctx)
		if err != nil {
			return err
		}
		keep := make([]corev1.Taint, 0, len(node.Spec.Taints))
		for _, t := range node.Spec.Taints {
			if !st.matches(t) {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(node.Spec.Taints) {
			return nil
		}
		var taints any = keep
		if len(keep) == 0 {
			taints = nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		})
		if err != nil {
			return fmt.Errorf("encoding the taint patch: %w", err)
		}
		if _, err := n.dyn.Resource(nodesResource).Patch(ctx, n.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: n.cfg.fieldManager()}); err != nil {
			return err
		}
		wrote = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("removing the startup taints %s from node %s: %w", st, n.cfg.NodeName, err)
	}
	if wrote {
		n.cfg.Log.Info("startup taints removed", "node", n.cfg.NodeName, "taints", st.String())
	}
	return wrote, nil
}
