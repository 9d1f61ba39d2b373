package configure

import (
	"strings"
	"testing"
)

// TestRuntimeClassTuningCheck: what a RuntimeClass cannot carry, or what
// would take berth's own selector or TEE key away, is refused naming it.
func TestRuntimeClassTuningCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   RuntimeClassTuning
		want string // "" accepts
	}{
		{"empty", RuntimeClassTuning{}, ""},
		{"quantities", RuntimeClassTuning{Overhead: map[string]string{"cpu": "1.5", "memory": "4Gi"}}, ""},
		{"millicores", RuntimeClassTuning{Overhead: map[string]string{"cpu": "250m"}}, ""},
		{"selector", RuntimeClassTuning{NodeSelector: map[string]string{"example.com/pool": "tee", "zone": ""}}, ""},
		{"not a quantity", RuntimeClassTuning{Overhead: map[string]string{"memory": "4 GB"}}, `overhead memory "4 GB": expected a Kubernetes quantity`},
		{"negative", RuntimeClassTuning{Overhead: map[string]string{"cpu": "-1"}}, `overhead cpu "-1": expected a quantity of 0 or more`},
		{"TEE key", RuntimeClassTuning{Overhead: map[string]string{"tdx.intel.com/keys": "0"}}, "overhead tdx.intel.com/keys: expected cpu or memory"},
		{"berth's installed label", RuntimeClassTuning{NodeSelector: map[string]string{"berth.dev/installed.kubeadm-qemu-tdx": "no"}}, "nodeSelector berth.dev/installed.kubeadm-qemu-tdx: keys under berth.dev/"},
		{"bad key", RuntimeClassTuning{NodeSelector: map[string]string{"-x": "y"}}, `nodeSelector key "-x"`},
		{"bad value", RuntimeClassTuning{NodeSelector: map[string]string{"x": "a b"}}, `nodeSelector x value "a b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.in.Check()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name, want string
	}{{"kata", ""}, {"kata-confidential", ""}, {"kata-qemu-tdx", "already a chosen platform's RuntimeClass"}, {"Kata", "default RuntimeClass name \"Kata\""}} {
		err := CheckDefaultClassName(tc.name, []string{"kata-qemu-tdx"})
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckDefaultClassName(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
}
