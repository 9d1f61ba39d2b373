package cli

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bytesOf reads every regular file under dir.
func bytesOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestConfigKataOptions: config apply takes a drop-in, a proxy and an
// annotation allowlist per platform and a custom runtime; bad values exit
// 2 naming the flag and change nothing; remove takes the custom runtime
// away.
func TestConfigKataOptions(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join(hostsDir, "rke2-containerd-v3"))); err != nil {
		t.Fatal(err)
	}
	in := t.TempDir()
	good := filepath.Join(in, "good.toml")
	bad := filepath.Join(in, "bad.toml")
	if err := os.WriteFile(good, []byte("[hypervisor.qemu]\ndefault_memory = 4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("[hypervisor.qemu]\ndefault_memory = 4096\nno_such_key = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--root", root, "config", "apply", "-p", "rke2-qemu-none", "--force"}
	before := bytesOf(t, root)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown key", []string{"--kata-drop-in", "rke2-qemu-none=" + bad}, "hypervisor.qemu.no_such_key is not a key"},
		{"malformed proxy", []string{"--agent-https-proxy", "rke2-qemu-none=proxy:3128"}, "expected a URL"},
		{"annotation not Kata's", []string{"--allow-hypervisor-annotations", "rke2-qemu-none=default_memory,bogus"}, `"bogus"`},
		{"other platform", []string{"--agent-https-proxy", "kubeadm-qemu-none=http://p:1"}, "not a platform (or custom runtime) this command configures"},
		{"custom name invalid", []string{"--custom-runtime", "Big_One"}, "lower-case"},
		{"no such drop-in file", []string{"--kata-drop-in", "rke2-qemu-none=" + filepath.Join(in, "nope.toml")}, "nope.toml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCheckCLI(t, append(base, tc.args...)...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s", code, ExitUsage, tc.want, errOut)
			}
			if after := bytesOf(t, root); !maps.Equal(after, before) {
				t.Error("a refused apply changed the tree")
			}
		})
	}
	code, out, errOut := runCheckCLI(t, append(base, "--kata-drop-in", "rke2-qemu-none="+good,
		"--agent-https-proxy", "rke2-qemu-none=http://proxy.example:3128", "--allow-hypervisor-annotations", "rke2-qemu-none=default_memory")...)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	kata := filepath.Join(root, "opt/berth/etc/kata/runtimes/rke2-qemu-none")
	cfg, _ := os.ReadFile(filepath.Join(kata, "rke2-qemu-none.toml"))
	drop, _ := os.ReadFile(filepath.Join(kata, "config.d/50-user-overrides.toml"))
	if !strings.Contains(string(cfg), "agent.https_proxy=http://proxy.example:3128") || !strings.Contains(string(cfg), `"default_memory"`) ||
		!strings.Contains(string(drop), "default_memory = 4096") {
		t.Errorf("applied files:\n%s\n%s", cfg, drop)
	}
	code, out, _ = runCheckCLI(t, append(base, "--kata-drop-in", "rke2-qemu-none="+good,
		"--agent-https-proxy", "rke2-qemu-none=http://proxy.example:3128", "--allow-hypervisor-annotations", "rke2-qemu-none=default_memory")...)
	if code != 0 || !strings.Contains(out, "nothing to change") {
		t.Errorf("second apply: exit %d\n%s", code, out)
	}
	code, out, errOut = runCheckCLI(t, append(base, "--custom-runtime", "kata-big", "--kata-drop-in", "kata-big="+good)...)
	if code != 0 || !strings.Contains(out, "kata-big") {
		t.Fatalf("custom runtime: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/berth/etc/kata/runtimes/kata-big/config.d/50-overrides.toml")); err != nil {
		t.Errorf("custom runtime's drop-in: %v", err)
	}
	code, out, errOut = runCheckCLI(t, "--root", root, "config", "remove", "-p", "rke2-qemu-none", "--custom-runtime", "kata-big")
	if code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("remove custom: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/berth/etc/kata/runtimes/kata-big")); !os.IsNotExist(err) {
		t.Errorf("custom runtime's directory left: %v", err)
	}
	if code, _, errOut := runCheckCLI(t, "--root", root, "config", "remove", "--all"); code != 0 {
		t.Fatalf("remove --all: %s", errOut)
	}
	if after := bytesOf(t, root); !maps.Equal(after, before) {
		t.Error("after remove --all the tree differs from the fixture")
	}
}
