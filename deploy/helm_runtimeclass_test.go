package deploy_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// TestChartRuntimeClassTuning: the chart's runtimeClasses.overrides and
// default class render as `berth runtimeclasses --overhead --node-selector
// --default-class` does (configure.RuntimeClass with the same tuning), with
// and without the node-installer and kata-deploy's selectors, the tuning
// winning over berth's values but never over its berth.dev/ keys or the
// TEE key resources.
func TestChartRuntimeClassTuning(t *testing.T) {
	snp, tdx, gpu := mustPlatform(t, "kubeadm-qemu-snp"), mustPlatform(t, "kubeadm-qemu-tdx"), mustPlatform(t, "kubeadm-qemu-snp+gpu")
	tunings := map[platform.Platform]configure.RuntimeClassTuning{
		// A number in the values (cpu: 2) is the quantity "2".
		snp: {Overhead: map[string]string{"cpu": "2", "memory": "4Gi"}, NodeSelector: map[string]string{"example.com/pool": "confidential"}},
		// Replaces the GPU operator's readiness label's value.
		gpu: {NodeSelector: map[string]string{"nvidia.com/cc.ready.state": "on"}},
	}
	overrides := `{"kubeadm-qemu-snp":{"overhead":{"cpu":2,"memory":"4Gi"},"nodeSelector":{"example.com/pool":"confidential"}},` +
		`"kubeadm-qemu-snp+gpu":{"nodeSelector":{"nvidia.com/cc.ready.state":"on"}}}`
	for _, tc := range []struct {
		name      string
		set       []string
		opt       configure.RuntimeClassOptions
		installer bool
	}{
		{"plain", nil, configure.RuntimeClassOptions{}, false},
		{"installer", nil, configure.RuntimeClassOptions{}, true},
		{"kata-deploy and nfd", []string{"kataDeploy.selectors=true", "kataDeploy.nfd=true"}, configure.RuntimeClassOptions{KataDeploy: true, NFD: true}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--set", fmt.Sprintf("nodeInstaller.enabled=%v", tc.installer),
				"--set", "nodeInstaller.manifest=https://example.com/m.json@sha256:" + strings.Repeat("0", 64),
				"--show-only", "templates/runtimeclasses.yaml",
				"--set", "platforms={kubeadm-qemu-snp,kubeadm-qemu-tdx,kubeadm-qemu-snp+gpu}",
				"--set-json", "runtimeClasses.overrides=" + overrides,
				"--set", "runtimeClasses.createDefault=true", "--set", "runtimeClasses.defaultPlatform=kubeadm-qemu-snp",
				"--set", "runtimeClasses.defaultName=kata-confidential"}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			got := map[string]classSpec{}
			var order []string
			for _, u := range decodeObjects(t, mustRender(t, args...)) {
				s := specOf(t, u)
				got[s.Name] = s
				order = append(order, s.Name)
			}
			// The default class follows its platform's, as in kata-deploy's chart.
			if want := "kata-qemu-snp kata-confidential kata-qemu-tdx kata-qemu-nvidia-gpu-snp"; strings.Join(order, " ") != want {
				t.Errorf("RuntimeClasses %v, want %s", order, want)
			}
			for _, c := range []struct {
				p    platform.Platform
				name string
			}{{snp, ""}, {snp, "kata-confidential"}, {tdx, ""}, {gpu, ""}} {
				opt := tc.opt
				opt.Tuning, opt.Name = tunings[c.p], c.name
				var u unstructured.Unstructured
				if err := yaml.Unmarshal(configure.RuntimeClass(c.p, opt), &u.Object); err != nil {
					t.Fatal(err)
				}
				want := specOf(t, &u)
				if tc.installer {
					delete(want.Selector, configure.PlatformLabel(c.p))
					want.Selector[configure.Suffix("").InstalledLabel(c.p)] = "true"
				}
				if g := got[want.Name]; !equalSpec(g, want) {
					t.Errorf("%s: chart\n  %+v\nberth runtimeclasses\n  %+v", want.Name, g, want)
				}
			}
			s := got["kata-qemu-snp"]
			if s.Overhead["cpu"] != "2" || s.Overhead["memory"] != "4Gi" || s.Selector["example.com/pool"] != "confidential" {
				t.Errorf("kata-qemu-snp does not carry the tuning: %+v", s)
			}
			if tc.opt.NFD && s.Overhead["sev-snp.amd.com/esids"] != "1" {
				t.Errorf("kata-qemu-snp lost its TEE key: %+v", s)
			}
		})
	}
}

// TestChartRuntimeClassTuningDebugTwin: the debug twin kata.debug adds
// takes its platform's tuning, as kata-deploy's debug classes reuse the
// shim's overhead and selector.
func TestChartRuntimeClassTuningDebugTwin(t *testing.T) {
	out := mustRender(t, "--set", "platforms={kubeadm-qemu-snp}", "--set", "kata.debug=true",
		"--set", "nodeInstaller.manifest=https://example.com/m.json@sha256:"+strings.Repeat("0", 64),
		"--set", "runtimeClasses.overrides.kubeadm-qemu-snp.overhead.cpu=3", "--set", "runtimeClasses.overrides.kubeadm-qemu-snp.nodeSelector.pool=tee",
		"--show-only", "templates/runtimeclasses.yaml")
	got := map[string]classSpec{}
	for _, u := range decodeObjects(t, out) {
		s := specOf(t, u)
		got[s.Name] = s
	}
	for _, name := range []string{"kata-qemu-snp", "kata-qemu-snp-debug"} {
		if s, ok := got[name]; !ok || s.Overhead["cpu"] != "3" || s.Selector["pool"] != "tee" {
			t.Errorf("%s: %+v (rendered %v), want cpu 3 and pool=tee", name, s, ok)
		}
	}
}

func mustPlatform(t *testing.T, name string) platform.Platform {
	t.Helper()
	p, err := platform.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
