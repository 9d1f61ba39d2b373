package migrate

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/testkit/upstreamtest"
)

// TestHelmTemplate: the values migrated from kata-deploy's own files pass
// `helm template` of berth's chart (its values.schema.json included), and
// the RuntimeClasses it renders use the handlers kata-deploy installs.
func TestHelmTemplate(t *testing.T) {
	testkit.NeedsTools(t, "Helm")
	helm := os.Getenv("BERTH_HELM")
	if helm == "" {
		t.Fatal("BERTH_HELM is not set: run `make tools` (or `bash .ci/helm.sh` and `. .ci/tools.env`)")
	}
	chart := filepath.Join(upstreamtest.RepoRoot(t), "deploy", "helm", "berth")
	for _, files := range [][]string{
		{"values.yaml"},
		{"try-kata-tee.values.yaml"},
		{"try-kata-nvidia-gpu.values.yaml"},
		{"try-kata-nvidia-cpu.values.yaml"},
		// A user's file of RuntimeClass and pod knobs (berth's own).
		{"values.yaml", "testdata/user-tuning.values.yaml"},
	} {
		t.Run(strings.Join(files, "+"), func(t *testing.T) {
			var in []Input
			for _, f := range files {
				if !strings.HasPrefix(f, "testdata/") {
					in = append(in, upstream(t, f))
					continue
				}
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				in = append(in, Input{Name: filepath.Base(f), Data: b})
			}

			res, err := KataDeploy(in)
			if err != nil {
				t.Fatal(err)
			}
			v, err := yaml.Marshal(res.Values)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			vf := filepath.Join(dir, "values.yaml")
			if err := os.WriteFile(vf, v, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, helm, "template", "berth", chart, "--namespace", "berth-system", "-f", vf,
				"--set", "nodeInstaller.manifest=https://example.com/m.json@sha256:"+strings.Repeat("0", 64))
			cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+dir+"/c", "HELM_CACHE_HOME="+dir+"/k", "HELM_DATA_HOME="+dir+"/d", "HOME="+dir)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("helm template: %v\n%s\nvalues:\n%s", err, stderr.String(), v)
			}
			var got []string
			for _, m := range regexp.MustCompile(`(?m)^handler: (\S+)$`).FindAllStringSubmatch(stdout.String(), -1) {
				got = append(got, m[1])
			}
			want := handlers(t, res)
			// A default class repeats its platform's handler.
			slices.Sort(got)
			got = slices.Compact(got)
			slices.Sort(want)
			if len(want) == 0 || !slices.Equal(got, want) {
				t.Errorf("RuntimeClass handlers:\n got %v\nwant %v", got, want)
			}
			if files[len(files)-1] != "testdata/user-tuning.values.yaml" {
				return
			}
			// Every knob of the user's file is berth's now, and renders.
			for _, k := range res.Knobs {
				if k.File == "user-tuning.values.yaml" && k.Outcome != Mapped && k.Outcome != Default {
					t.Errorf("%s: %s %s", k.Path, k.Outcome, k.Why)
				}
			}
			for _, want := range []string{
				"name: kata-confidential\n", "handler: kata-qemu-tdx\n", "cpu: \"2\"\n    memory: 4096Mi\n", "example.com/pool: confidential\n",
				"--startup-taint=katacontainers.io/kata-runtime:NoSchedule", "--startup-taint=example.com/kata-not-ready",
				"priorityClassName: system-cluster-critical\n", "maxUnavailable: 25%\n", "team: platform\n", "example.com/owner: platform-team\n",
				"- key: node.cloud/reserved\n", "- name: registry-credentials\n",
				"--containerd-drop-in=/etc/berth-drop-in/containerd.toml", "max_concurrent_downloads = 8",
			} {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("the rendered chart lacks %q", want)
				}
			}
		})
	}
}
