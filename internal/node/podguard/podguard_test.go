package podguard_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/node/podguard"
)

// TestDecide words the guard's decisions: nothing running passes, pods
// running are refused by name (at most podguard.MaxListed, then a
// count), a runtime that cannot be asked is refused too, and force turns
// each refusal into a warning saying what was forced.
func TestDecide(t *testing.T) {
	many := make([]podguard.Pod, 12)
	for i := range many {
		many[i] = podguard.Pod{Namespace: "ns", Name: fmt.Sprintf("p%02d", i), Handler: "kata-qemu"}
	}
	for _, tc := range []struct {
		name  string
		c     podguard.Check
		want  string
		clean bool
	}{
		{"nothing runs", podguard.Check{Handlers: []string{"kata-qemu"}}, "", true},
		{"one pod", podguard.Check{Handlers: []string{"kata-qemu"}, Pods: []podguard.Pod{{Namespace: "shop", Name: "web-0"}}}, "1 pod runs on handler kata-qemu on this node: shop/web-0", false},
		{"many pods", podguard.Check{Handlers: []string{"kata-qemu", "kata-clh"}, Pods: many}, "12 pods run on handlers kata-qemu, kata-clh on this node: ns/p00, ns/p01, ns/p02, ns/p03, ns/p04, ns/p05, ns/p06, ns/p07, ns/p08, ns/p09 and 2 more", false},
		{"runtime not answering", podguard.Check{Handlers: []string{"kata-qemu"}, Socket: "/run/containerd/containerd.sock", Err: errors.New("connection refused")}, "could not be asked which pods run on handler kata-qemu (CRI socket /run/containerd/containerd.sock: connection refused)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Force = "--force"
			warn, err := tc.c.Decide(false)
			if tc.clean {
				if warn != "" || err != nil {
					t.Errorf("nothing to guard: warning %q, error %v", warn, err)
				}
				return
			}
			if err == nil || !errdefs.IsRefused(err) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--force") || warn != "" {
				t.Errorf("refusal %v (refused %v), warning %q; want a refusal with %q naming --force", err, errdefs.IsRefused(err), warn, tc.want)
			}
			if re := (*podguard.RefusedError)(nil); !errors.As(err, &re) || len(re.Check.Pods) != len(tc.c.Pods) {
				t.Errorf("the refusal does not carry what was found: %v", err)
			}
			warn, err = tc.c.Decide(true)
			if err != nil || !strings.HasPrefix(warn, "--force: removing") || !strings.Contains(warn, tc.want) {
				t.Errorf("forced: warning %q, error %v; want the warning to say what was forced (%q)", warn, err, tc.want)
			}
		})
	}
}
