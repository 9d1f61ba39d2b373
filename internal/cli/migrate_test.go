package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/testkit/upstreamtest"
)

// TestMigrateKataDeploy holds `berth migrate kata-deploy` to its exit
// statuses: 0 when every knob is carried over, 1 when one is not
// supported (unless --allow-unsupported), 2 on a malformed or missing file;
// values on stdout, the knob report on stderr.
func TestMigrateKataDeploy(t *testing.T) {
	chart := upstreamtest.Path(t, "kata-containers-4.1.0/tools/packaging/kata-deploy/helm-chart/kata-deploy")
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mine := write("mine.yaml", "k8sDistribution: k3s\nshims:\n  disableAll: true\n  qemu-snp:\n    enabled: true\nnodeSelector:\n  pool: kata\n")
	proxy := write("proxy.yaml", "shims:\n  qemu-snp:\n    agent:\n      httpsProxy: http://user:pw@proxy:3128\ndevkit: true\n")
	bad := write("bad.yaml", "shims:\n  qemu: [1\n")
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		stdout    []string
		stderr    []string
		notStderr string
	}{
		{"chart and overrides", []string{filepath.Join(chart, "values.yaml"), mine}, ExitOK,
			[]string{"- k3s-qemu-snp\n", "    pool: kata\n"},
			[]string{"shims.qemu-snp.enabled", "mapped", "platforms: k3s-qemu-snp", "nodeInstaller.nodeSelector", "mine.yaml:"}, ""},
		{"unsupported", []string{mine, proxy}, errdefs.ExitFailure,
			[]string{"- k3s-qemu-snp\n", "agentProxy:\n    k3s-qemu-snp:\n      httpsProxy: http://user:pw@proxy:3128\n"},
			[]string{"shims.qemu-snp.agent.httpsProxy", "kata.agentProxy.k3s-qemu-snp.httpsProxy", "proxy.yaml:4", "devkit", "not supported", "proxy.yaml:5", "1 knob(s) the files set are not supported"}, "pw@proxy"},
		{"unsupported allowed", []string{"--allow-unsupported", mine, proxy}, ExitOK, []string{"- k3s-qemu-snp\n"}, []string{"not supported"}, "Error"},
		{"tee example", []string{filepath.Join(chart, "try-kata-tee.values.yaml")}, errdefs.ExitFailure,
			[]string{"- kubeadm-qemu-tdx\n"}, []string{"shims.qemu-se.enabled", "s390x"}, ""},
		{"malformed", []string{mine, bad}, ExitUsage, nil, []string{"bad.yaml: not YAML: yaml: line "}, "[1"},
		{"missing", []string{filepath.Join(dir, "nope.yaml")}, ExitUsage, nil, []string{"nope.yaml"}, ""},
		{"no files", nil, ExitUsage, nil, []string{"requires at least 1 arg"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, append([]string{"migrate", "kata-deploy"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, stderr)
			}
			for _, w := range tc.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			if out != "" {
				var v map[string]any
				if err := yaml.Unmarshal([]byte(out), &v); err != nil {
					t.Errorf("stdout is not YAML: %v", err)
				}
			}
			for _, w := range tc.stderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tc.notStderr != "" && strings.Contains(stderr, tc.notStderr) {
				t.Errorf("stderr has %q:\n%s", tc.notStderr, stderr)
			}
		})
	}
}
