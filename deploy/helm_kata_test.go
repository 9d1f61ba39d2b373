package deploy_test

import (
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/goldenfile"
)

// TestChartKata renders the kata: values (drop-ins, agent proxy,
// annotation allowlist, a custom runtime, debug) into the node-installer's
// arguments, the custom runtime's RuntimeClass and the debug twins
// (golden), and refuses bad ones naming the value. Unset, they change
// nothing: TestHelmTemplate's goldens are those of before.
func TestChartKata(t *testing.T) {
	out := mustRender(t, "-f", "testdata/helm/kata-values.yaml")
	goldenfile.Assert(t, filepath.Join("testdata", "helm", "kata.yaml"), []byte(out))
	for _, want := range []string{
		`- "--kata-drop-in-toml=kubeadm-qemu-none=[hypervisor.qemu]\ndefault_memory = 4096\n"`,
		`- "--agent-https-proxy=kubeadm-qemu-snp+gpu=http://proxy.example:3128"`,
		`- "--agent-https-proxy=kubeadm-qemu-snp+gpu+debug=http://proxy.example:3128"`,
		`- "--allow-hypervisor-annotations=kubeadm-qemu-none=default_memory,default_vcpus"`,
		`- "--custom-runtime=kata-big=kubeadm-qemu-none"`,
		"platforms: kubeadm-qemu-snp+gpu kubeadm-qemu-none kubeadm-qemu-snp+gpu+debug kubeadm-qemu-none+debug",
		"name: kata-qemu-debug", "name: kata-qemu-nvidia-gpu-snp-debug",
		"name: kata-big\n", "handler: kata-big\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the rendering does not have %q", want)
		}
	}
	manifest := "--set=nodeInstaller.manifest=https://example.com/m.json@sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"malformed proxy", []string{"--set", "platforms={kubeadm-qemu-none}", manifest, "--set", "kata.agentProxy.kubeadm-qemu-none.httpsProxy=proxy:3128"},
			[]string{"/kata/agentProxy/kubeadm-qemu-none/httpsProxy"}},
		{"drop-in for an unknown platform", []string{"--set", "platforms={kubeadm-qemu-none}", manifest, "--set", "kata.dropIns.nope=x"},
			[]string{"invalid propertyName 'nope'"}},
		{"custom runtime name invalid", []string{"--set", "platforms={kubeadm-qemu-none}", manifest, "--set-json", `kata.customRuntimes=[{"name":"Big_One","platform":"kubeadm-qemu-none"}]`},
			[]string{"/kata/customRuntimes/0/name"}},
		{"custom runtime of a platform not chosen", []string{"--set", "platforms={kubeadm-qemu-none}", manifest, "--set-json", `kata.customRuntimes=[{"name":"big","platform":"kubeadm-qemu-tdx"}]`},
			[]string{`kata.customRuntimes[0] (big): platform "kubeadm-qemu-tdx" is not one of platforms`}},
		{"unknown kata value", []string{"--set", "kata.dropin.x=y"},
			[]string{"additional properties 'dropin' not allowed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(t, tc.args...)
			if err == nil {
				t.Fatal("helm template accepted the values")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}
