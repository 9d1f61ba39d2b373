package configure

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
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

// TestTuningGrammarsMatchAPIMachinery: the quantity and label grammars
// written here (so that berth does not link apimachinery's validation)
// accept what apimachinery accepts, on the edges, except a bare suffix
// and a plus sign, which the chart's schema refuses too.
func TestTuningGrammarsMatchAPIMachinery(t *testing.T) {
	for _, q := range []string{"1", "250m", "1.5", ".5", "1.", "4Gi", "512Mi", "1e3", "1E-2", "2k", "1Ki", "0", "lots", "1 Gi", "1gi", "1.5.5", "Mi", "", "1e", "+1", "0x10"} {
		_, perr := resource.ParseQuantity(q)
		if q == "Mi" || q == "+1" {
			perr = errors.New("refused by the chart's schema too")
		}
		err := RuntimeClassTuning{Overhead: map[string]string{"cpu": q}}.Check()
		if (perr == nil) != (err == nil) {
			t.Errorf("quantity %q: apimachinery %v, berth %v", q, perr, err)
		}
	}
	for _, k := range []string{"a", "example.com/pool", "a.b/c_d.e-f", "-x", "x-", "A.com/x", "example.com/", "/x", "a/b/c", strings.Repeat("a", 64), "node.kubernetes.io/instance-type"} {
		want := len(validation.IsQualifiedName(k)) == 0
		if got := checkLabelKey(k) == nil; got != want {
			t.Errorf("label key %q: apimachinery valid %v, berth %v", k, want, got)
		}
	}
	for _, v := range []string{"", "true", "a b", "-a", "a_b.c", strings.Repeat("v", 64)} {
		want := len(validation.IsValidLabelValue(v)) == 0
		got := RuntimeClassTuning{NodeSelector: map[string]string{"k": v}}.Check() == nil
		if got != want {
			t.Errorf("label value %q: apimachinery valid %v, berth %v", v, want, got)
		}
	}
}
