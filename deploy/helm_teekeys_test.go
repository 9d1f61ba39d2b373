package deploy_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartTEEKeys: nodeInstaller.advertiseTEEKeys (without kata-deploy's
// NFD rule) passes --advertise-tee-keys, grants patch of nodes/status, and
// makes the SNP and TDX RuntimeClasses request one key each, and nothing
// else; off (the default), none of the three.
func TestChartTEEKeys(t *testing.T) {
	for _, on := range []bool{true, false} {
		args := []string{"--set", "nodeInstaller.manifest=https://example.com/m.json@sha256:" + strings.Repeat("0", 64),
			"--set", "platforms={k3s-qemu-snp,k3s-qemu-tdx,k3s-qemu-none}"}
		if on {
			args = append(args, "--set", "nodeInstaller.advertiseTEEKeys=true")
		}
		objs := decodeObjects(t, mustRender(t, args...))
		statusRule, flag := false, false
		keys := map[string]map[string]string{}
		for _, u := range objs {
			switch u.GetKind() {
			case "ClusterRole":
				rules, _, _ := unstructured.NestedSlice(u.Object, "rules")
				for _, r := range rules {
					res, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
					statusRule = statusRule || slices.Contains(res, "nodes/status")
				}
			case "DaemonSet":
				cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
				for _, c := range cs {
					a, _, _ := unstructured.NestedStringSlice(c.(map[string]any), "args")
					flag = flag || slices.Contains(a, "--advertise-tee-keys")
				}
			case "RuntimeClass":
				keys[u.GetName()] = specOf(t, u).Overhead
			}
		}
		if statusRule != on || flag != on {
			t.Errorf("advertiseTEEKeys=%v: nodes/status rule %v, --advertise-tee-keys %v", on, statusRule, flag)
		}
		want := map[string]string{"kata-qemu-snp": "sev-snp.amd.com/esids", "kata-qemu-tdx": "tdx.intel.com/keys", "kata-qemu": ""}
		if len(keys) != len(want) {
			t.Fatalf("RuntimeClasses %v, want %d", keys, len(want))
		}
		for class, res := range want {
			o := keys[class]
			n := 0
			for k, v := range o {
				if strings.Contains(k, "/") {
					n++
					if !on || k != res || v != "1" {
						t.Errorf("advertiseTEEKeys=%v: %s requests %s=%s", on, class, k, v)
					}
				}
			}
			if on && res != "" && n != 1 {
				t.Errorf("advertiseTEEKeys=%v: %s overhead %v, want one %s", on, class, o, res)
			}
		}
	}
}
