package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/goldenfile"
)

// TestConfigRenderGolden renders on fixture hosts whose facts select the
// containerd version (v2 and v3), the k3s/RKE2 templates and CRI-O.
func TestConfigRenderGolden(t *testing.T) {
	for _, tc := range []struct{ host, plat string }{
		{"tdx-emr-kubeadm-ready", "kubeadm-qemu-tdx"},
		{"snp-genoa-k3s-ready", "k3s-qemu-snp-genoa"},
		{"rke2-containerd-v3", "rke2-qemu-none"},
		{"openshift-crio", "openshift-qemu-none"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			code, out, errOut := runCheckCLI(t, "--root", filepath.Join(hostsDir, tc.host), "config", "render", "--platform", tc.plat)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			goldenfile.Assert(t, filepath.Join("testdata/config", tc.host+".golden"), []byte(out))
		})
	}
}

func TestConfigRefusals(t *testing.T) {
	t.Run("checks fail", func(t *testing.T) {
		// render is a preview: it shows the files and warns.
		code, out, errOut := runCheckCLI(t, "--root", filepath.Join(hostsDir, "cloud-vm-no-nested"), "config", "render", "-p", "kubeadm-qemu-snp")
		if code != 0 || !strings.HasPrefix(errOut, "warning: platform kubeadm-qemu-snp is not ready") || !strings.Contains(errOut, "virt.hardware") ||
			!strings.Contains(out, "kubeadm-qemu-snp.toml") {
			t.Errorf("render: exit %d, stderr %s", code, errOut)
		}
		// apply refuses it unless --force.
		root := t.TempDir()
		if err := os.CopyFS(root, os.DirFS(filepath.Join(hostsDir, "cloud-vm-no-nested"))); err != nil {
			t.Fatal(err)
		}
		code, _, errOut = runCheckCLI(t, "--root", root, "config", "apply", "-p", "kubeadm-qemu-snp")
		if code != ExitNotReady || !strings.Contains(errOut, "virt.hardware") || !strings.Contains(errOut, "--force") {
			t.Errorf("apply: exit %d, stderr %s", code, errOut)
		}
	})
	t.Run("unknown containerd version", func(t *testing.T) {
		args := []string{"--root", filepath.Join(hostsDir, "openshift-crio"), "config", "render", "-p", "kubeadm-qemu-none"}
		code, _, errOut := runCheckCLI(t, args...)
		if code != ExitUsage || !strings.Contains(errOut, "--containerd-config-version") {
			t.Errorf("exit %d, stderr %s", code, errOut)
		}
		code, out, errOut := runCheckCLI(t, append(args, "--containerd-config-version", "3")...)
		if code != 0 || !strings.Contains(out, `io.containerd.cri.v1.runtime`) || !strings.Contains(out, "(--containerd-config-version)") {
			t.Errorf("with the flag: exit %d, stderr %s", code, errOut)
		}
	})
	t.Run("no platform", func(t *testing.T) {
		code, _, errOut := runCheckCLI(t, "config", "render")
		if code != ExitUsage || !strings.Contains(errOut, "never picks a platform") {
			t.Errorf("exit %d, stderr %s", code, errOut)
		}
	})
	t.Run("apply on a snapshot", func(t *testing.T) {
		code, _, errOut := runCheckCLI(t, "--root", filepath.Join(t.TempDir(), "x.tar.gz"), "config", "apply", "-p", "kubeadm-qemu-none")
		if code != ExitUsage {
			t.Errorf("exit %d, stderr %s", code, errOut)
		}
	})
}

// TestConfigApplyRemoveOnFixture applies into a copy of the RKE2 fixture,
// whose template berth must extend (backup) and later restore.
func TestConfigApplyRemoveOnFixture(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join(hostsDir, "rke2-containerd-v3"))); err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(root, "var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl")
	orig, err := os.ReadFile(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	apply := []string{"--root", root, "config", "apply", "-p", "rke2-qemu-none", "--force", "--restart"}
	code, out, errOut := runCheckCLI(t, apply...)
	if code != 0 || !strings.Contains(out, "config-v3.toml.tmpl") || !strings.Contains(errOut, "not restarting") {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	got, _ := os.ReadFile(tmpl)
	if !strings.HasPrefix(string(got), string(orig)) || !strings.Contains(string(got), "runtimes.kata-qemu]") {
		t.Errorf("template after apply:\n%s", got)
	}
	code, out, _ = runCheckCLI(t, apply...)
	if code != 0 || !strings.Contains(out, "nothing to change") {
		t.Errorf("second apply: exit %d\n%s", code, out)
	}
	code, out, errOut = runCheckCLI(t, "--root", root, "config", "remove", "--all")
	if code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("remove: exit %d\n%s\n%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(tmpl); string(got) != string(orig) {
		t.Errorf("template not restored byte for byte:\n%s", got)
	}
	code, out, _ = runCheckCLI(t, "--root", root, "config", "remove", "--all")
	if code != 0 || !strings.Contains(out, "nothing to remove") {
		t.Errorf("second remove: exit %d %s", code, out)
	}
}

// BenchmarkConfigRender is `berth config render` end to end on a fixture:
// discovery, checks, rendering and the merge preview.
func BenchmarkConfigRender(b *testing.B) {
	args := []string{"--root", filepath.Join(hostsDir, "tdx-emr-kubeadm-ready"), "config", "render", "-p", "kubeadm-qemu-tdx"}
	for b.Loop() {
		var out, errb strings.Builder
		if code := run(args, strings.NewReader(""), &out, &errb, fixedEnv); code != 0 {
			b.Fatalf("exit %d: %s", code, errb.String())
		}
	}
}

func TestConfigRenderOutAndBadConfig(t *testing.T) {
	root := t.TempDir()
	main := filepath.Join(root, "etc/containerd/config.toml")
	os.MkdirAll(filepath.Dir(main), 0o755)
	os.WriteFile(main, []byte("version = 3\n[plugins\n"), 0o644)
	args := []string{"--root", root, "config", "render", "-p", "kubeadm-qemu-none", "--containerd-config-version", "3"}
	code, _, errOut := runCheckCLI(t, args...)
	if code != ExitNotReady || !strings.Contains(errOut, "etc/containerd/config.toml:2:") {
		t.Errorf("broken config: exit %d, stderr %s", code, errOut)
	}
	code, _, errOut = runCheckCLI(t, "--root", root, "config", "apply", "-p", "kubeadm-qemu-none", "--force", "--containerd-config-version", "3")
	if b, _ := os.ReadFile(main); code != ExitNotReady || !strings.Contains(errOut, "etc/containerd/config.toml:2:") || string(b) != "version = 3\n[plugins\n" {
		t.Errorf("apply on a broken config: exit %d (%s), file now %q", code, errOut, b)
	}

	os.WriteFile(main, []byte("version = 3\n"), 0o644)
	out := t.TempDir()
	code, stdout, errOut := runCheckCLI(t, append(args, "--out", out)...)
	if code != 0 {
		t.Fatalf("render --out: exit %d %s", code, errOut)
	}
	for _, f := range []string{"opt/berth/etc/kata/kubeadm-qemu-none.toml", "etc/containerd/conf.d/berth-kata-qemu.toml",
		"etc/containerd/config.toml", "runtimeclass-kata-qemu.yaml"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil || !strings.Contains(stdout, f) {
			t.Errorf("render --out did not write %s: %v", f, err)
		}
	}
	if b, _ := os.ReadFile(main); string(b) != "version = 3\n" {
		t.Errorf("render changed the node: %q", b)
	}
}
