package clustercmd

import (
	"berth.dev/berth/internal/cli"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/goldenfile"
	"berth.dev/berth/platform"
)

func TestRuntimeClasses(t *testing.T) {
	for _, tc := range []struct {
		name, golden string
		args         []string
	}{
		{"yaml", "runtimeclasses/two.yaml", []string{"runtimeclasses", "-p", "k3s-qemu-snp-genoa", "--platform", "kata-qemu-tdx"}},
		{"json", "runtimeclasses/two.json", []string{"runtimeclasses", "-p", "k3s-qemu-snp-genoa", "--platform", "kata-qemu-tdx", "-o", "json"}},
		{"tee labels", "runtimeclasses/tee-labels.yaml", []string{"runtimeclasses", "-p", "Metal-QEMU-SNP", "--tee-labels"}},
		{"install suffix", "runtimeclasses/suffix.yaml", []string{"runtimeclasses", "-p", "k3s-qemu-snp-genoa", "--install-suffix", "blue"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			goldenfile.Assert(t, filepath.Join("testdata", tc.golden), []byte(out))
		})
	}
	t.Run("json is a v1 List", func(t *testing.T) {
		_, out, _ := runCLI(t, "runtimeclasses", "-p", "kata-qemu", "-o", "json")
		var l struct {
			Kind  string
			Items []struct {
				Kind, Handler string
				Scheduling    struct{ NodeSelector map[string]string }
			}
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		if l.Kind != "List" || len(l.Items) != 1 || l.Items[0].Kind != "RuntimeClass" || l.Items[0].Scheduling.NodeSelector["berth.dev/platform.kubeadm-qemu-none"] != "true" {
			t.Errorf("%+v", l)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no platform", []string{"runtimeclasses"}, "--platform is required"},
		{"bad platform", []string{"runtimeclasses", "-p", "nope"}, "--platform"},
		{"bad format", []string{"runtimeclasses", "-p", "kata-qemu", "-o", "nfd"}, "unknown output format"},
		{"bad install suffix", []string{"runtimeclasses", "-p", "kata-qemu", "--install-suffix", "b.lue"}, `--install-suffix "b.lue"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != cli.ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}

// TestRuntimeClassSelectsAgentLabel: the nodeSelector of every
// platform's RuntimeClass is a label the agent publishes.
func TestRuntimeClassSelectsAgentLabel(t *testing.T) {
	for _, p := range platform.All() {
		if got, want := configure.PlatformLabel(p), nodereport.PlatformLabelPrefix+p.Name(); got != want {
			t.Fatalf("%s: RuntimeClass selects %s, the agent writes %s", p, got, want)
		}
		if !nodereport.LabelFits(p.Name()) {
			t.Errorf("%s: label key too long for the agent to publish", p)
		}
	}
}

func TestAgentUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no node name", []string{"agent", "--root", "../../../testdata/hosts/snp-genoa-k3s-ready"}, "--node-name or NODE_NAME"},
		{"short interval", []string{"agent", "--node-name", "n", "--interval", "10ms"}, "--interval"},
		{"bad platform", []string{"agent", "--node-name", "n", "-p", "nope"}, "--platform"},
		{"no cluster", []string{"agent", "--node-name", "n", "--kubeconfig", "/nonexistent/kubeconfig"}, "Kubernetes client configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != cli.ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}
