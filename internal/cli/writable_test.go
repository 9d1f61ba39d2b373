package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptyRootIsUsage: --root ” (an unset variable in a script) is a
// usage error for every command, never this machine's /.
func TestEmptyRootIsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--root", "", "facts"},
		{"--root=", "check", "-p", "kubeadm-qemu-none"},
		{"--root", "", "config", "apply", "-p", "kubeadm-qemu-none", "--force"},
		{"--root", "", "config", "remove", "--all"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, errOut := runCheckCLI(t, args...)
			if code != ExitUsage || !strings.Contains(errOut, "--root: an empty path") || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want a usage error naming --root", code, out, errOut)
			}
		})
	}
}

// TestConfigRenderOutConfined: render --out writes only inside DIR. A
// symlink planted at a file's name is replaced (the file outside it
// names keeps its content); a directory linked out of DIR is refused and
// nothing is written outside.
func TestConfigRenderOutConfined(t *testing.T) {
	root := t.TempDir()
	put := func(p, s string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(filepath.Join(root, "etc/containerd/config.toml"), "version = 3\n")
	args := []string{"--root", root, "config", "render", "-p", "kubeadm-qemu-none", "--containerd-config-version", "3", "--out"}

	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	put(victim, "keep")
	out := t.TempDir()
	os.Symlink(victim, filepath.Join(out, "runtimeclass-kata-qemu.yaml"))
	code, _, errOut := runCheckCLI(t, append(args, out)...)
	if code != 0 {
		t.Fatalf("render --out: exit %d %s", code, errOut)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("written through the planted link: %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(out, "runtimeclass-kata-qemu.yaml")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the planted link was not replaced by the file: %v %v", fi, err)
	}

	out = t.TempDir()
	os.Symlink(outside, filepath.Join(out, "etc"))
	code, _, errOut = runCheckCLI(t, append(args, out)...)
	if code == 0 || !strings.Contains(errOut, "--out") {
		t.Errorf("a directory linked out of --out: exit %d %s, want an error", code, errOut)
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("render wrote outside --out: %v", ents)
	}
}

// TestACPICacheDir: refvalues keeps its ACPI cache in --cache when given,
// in berth's cache on this machine for the live root, and in the user's
// cache directory for any other --root, never in this machine's
// /var/cache.
func TestACPICacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/home/u/.cache")
	for _, tc := range []struct {
		root, cache string
		given       bool
		want        string
	}{
		{"/", "/var/cache/berth", false, map[bool]string{true: "/var/cache/berth", false: "/home/u/.cache/berth"}[os.Geteuid() == 0]},
		{"/host/", "/var/cache/berth", false, "/home/u/.cache/berth"},
		{"snap.tar.gz", "/var/cache/berth", false, "/home/u/.cache/berth"},
		{"/host", "/tmp/c", true, "/tmp/c"},
		{"/host", "", true, ""},
	} {
		g := &Globals{root: tc.root}
		if got := acpiCacheDir(g, tc.cache, tc.given); got != tc.want {
			t.Errorf("--root %s --cache %q (given %v): %q, want %q", tc.root, tc.cache, tc.given, got, tc.want)
		}
	}
}
