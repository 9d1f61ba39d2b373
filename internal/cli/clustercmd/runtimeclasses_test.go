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
		// kata-deploy's per-shim runtimeClass overrides and default class:
		// the tuning wins over the platform's overhead and the NFD key
		// stays; the default class follows its platform's.
		{"tuning and default class", "runtimeclasses/tuning.yaml", []string{"runtimeclasses", "-p", "k3s-qemu-snp-genoa", "-p", "kata-qemu-tdx", "--nfd",
			"--overhead", "k3s-qemu-snp-genoa:cpu=2,memory=4Gi", "--node-selector", "k3s-qemu-snp-genoa:example.com/pool=confidential",
			"--node-selector", "kata-qemu-tdx:intel.feature.node.kubernetes.io/tdx=yes", "--default-class", "kata-qemu-tdx"}},
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
		{"overhead not a quantity", []string{"runtimeclasses", "-p", "kata-qemu", "--overhead", "kata-qemu:cpu=lots"}, `overhead cpu "lots": expected a Kubernetes quantity`},
		{"overhead of a TEE key", []string{"runtimeclasses", "-p", "kata-qemu-snp", "--overhead", "kata-qemu-snp:sev-snp.amd.com/esids=2"}, "overhead sev-snp.amd.com/esids: expected cpu or memory"},
		{"overhead without a platform", []string{"runtimeclasses", "-p", "kata-qemu", "--overhead", "cpu=1"}, "expected PLATFORM:KEY=VALUE"},
		{"overhead of a platform not asked for", []string{"runtimeclasses", "-p", "kata-qemu", "--overhead", "kata-qemu-tdx:cpu=1"}, "--overhead kubeadm-qemu-tdx: not one of the --platform values"},
		{"selector on berth's key", []string{"runtimeclasses", "-p", "kata-qemu", "--node-selector", "kata-qemu:berth.dev/installed.kubeadm-qemu-none=no"}, "keys under berth.dev/ are berth's own"},
		{"selector not a label", []string{"runtimeclasses", "-p", "kata-qemu", "--node-selector", "kata-qemu:a b=c"}, `nodeSelector key "a b"`},
		{"default class of a platform not asked for", []string{"runtimeclasses", "-p", "kata-qemu", "--default-class", "kata-qemu-tdx"}, "--default-class kubeadm-qemu-tdx: not one of the --platform values"},
		{"default class named as a platform's", []string{"runtimeclasses", "-p", "kata-qemu", "--default-class", "kata-qemu", "--default-class-name", "kata-qemu"}, `default RuntimeClass name "kata-qemu" is already`},
		{"default class with a suffix", []string{"runtimeclasses", "-p", "kata-qemu", "--default-class", "kata-qemu", "--install-suffix", "blue"}, "--default-class with --install-suffix"},
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
