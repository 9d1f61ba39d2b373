package deploy_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"berth.dev/berth/internal/cluster/nodeinstall"
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

// TestChartJobMode: nodeInstaller.mode=job renders no node-installer
// DaemonSet but a per-node Job template the dispatcher accepts (it runs
// the node-installer --run-once, pinned by the dispatcher), the
// dispatcher's post-install/upgrade hook with its parallelism and node
// selector, RBAC to list nodes and to list, create and delete Jobs in the
// release namespace only, and a teardown hook that dispatches cleanup
// Jobs instead of patching a DaemonSet.
func TestChartJobMode(t *testing.T) {
	objs := decodeObjects(t, mustRender(t, "--set", "nodeInstaller.manifest=https://example.com/m.json@sha256:"+strings.Repeat("0", 64),
		"--set", "platforms={k3s-qemu-tdx}", "--set", "nodeInstaller.mode=job", "--set", "nodeInstaller.job.parallelism=4",
		"--set-string", "nodeInstaller.nodeSelector.berth\\.dev/install=true"))
	byName := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		byName[u.GetKind()+"/"+u.GetName()] = u
	}
	if u := byName["DaemonSet/berth-node-installer"]; u != nil {
		t.Error("job mode renders the node-installer DaemonSet")
	}
	cm := byName["ConfigMap/berth-node-installer-job"]
	if cm == nil {
		t.Fatal("no ConfigMap berth-node-installer-job")
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "job.yaml")
	tmpl, err := nodeinstall.ParseJobTemplate([]byte(data), "job.yaml")
	if err != nil {
		t.Fatalf("the rendered Job template: %v\n%s", err, data)
	}
	if ps := tmpl.Spec.Template.Spec; ps.ServiceAccountName != "berth-node-installer" || ps.Containers[0].ReadinessProbe != nil || !*ps.Containers[0].SecurityContext.Privileged {
		t.Errorf("per-node Job pod: %+v", ps)
	}
	args := func(u *unstructured.Unstructured) []string {
		cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		a, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
		return a
	}
	d := byName["Job/berth-node-installer-dispatcher"]
	if d == nil {
		t.Fatal("no dispatcher Job")
	}
	if a := args(d); !slices.Contains(a, "dispatch") || !slices.Contains(a, "--parallelism=4") || !slices.Contains(a, "--node-selector=berth.dev/install=true") {
		t.Errorf("dispatcher args %v", a)
	}
	if h := d.GetAnnotations()["helm.sh/hook"]; h != "post-install,post-upgrade" {
		t.Errorf("dispatcher hook %q", h)
	}
	role := byName["Role/berth-node-installer-dispatcher"]
	rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
	if len(rules) != 1 || role.GetNamespace() != releaseNS {
		t.Errorf("dispatcher Role %v in %s", rules, role.GetNamespace())
	}
	cr := byName["ClusterRole/berth-node-installer-dispatcher"]
	crRules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
	if v, _, _ := unstructured.NestedStringSlice(crRules[0].(map[string]any), "verbs"); len(crRules) != 1 || !slices.Equal(v, []string{"list"}) {
		t.Errorf("dispatcher ClusterRole %v", crRules)
	}
	td := byName["Job/berth-node-installer-teardown"]
	if td == nil {
		t.Fatal("no teardown Job")
	}
	if a := args(td); !slices.Contains(a, "--job-template=/etc/berth/job.yaml") || slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--daemonset") }) {
		t.Errorf("teardown args %v", a)
	}
}
