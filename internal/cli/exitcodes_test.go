package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"berth.dev/berth/internal/testkit"
)

// TestExitCodes runs real commands through the cobra tree and holds each
// to its exit status (README "Exit codes"): what is wrong on the command
// line exits 2 naming the flag, whatever fails after validation exits 1
// with a named error.
func TestExitCodes(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("/dev/full: %v", err)
	}
	defer full.Close()
	render := []string{"--root", fixtureRoot, "config", "render", "-p", "k3s-qemu-snp"}
	for _, tc := range []struct {
		name   string
		args   []string
		stdout func(t *testing.T) *os.File // nil: a buffer
		code   int
		want   []string
		absent string
	}{
		{name: "unknown command", args: []string{"frobnicate"}, code: ExitUsage, want: []string{"unknown command"}},
		{name: "unknown flag", args: []string{"check", "--frobnicate"}, code: ExitUsage, want: []string{"--frobnicate"}},
		{name: "negative --nfd-expiry", args: []string{"--root", fixtureRoot, "check", "-o", "nfd", "--nfd-expiry", "-24h"}, code: ExitUsage,
			want: []string{"--nfd-expiry -24h0m0s: expected a duration of 0 (none) or more"}},
		{name: "zero --nfd-expiry is none", args: []string{"--root", fixtureRoot, "check", "-o", "nfd", "--nfd-expiry", "0"}, code: ExitOK},
		{name: "positive --nfd-expiry", args: []string{"--root", fixtureRoot, "check", "-o", "nfd", "--nfd-expiry", "24h"}, code: ExitOK},
		{name: "zero --memory", args: []string{"refvalues", "--platform", "kata-qemu-tdx", "--firmware", "/nonexistent", "--memory", "0"}, code: ExitUsage,
			want: []string{"--memory 0: expected at least 1"}},
		{name: "render to a full disk", args: render, stdout: func(*testing.T) *os.File { return full }, code: ExitNotReady,
			want: []string{"writing the result to stdout", "no space left on device"}},
		{name: "render to a buffer", args: render, code: ExitOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			var errb bytes.Buffer
			var code int
			if tc.stdout != nil {
				code = run(tc.args, strings.NewReader(""), tc.stdout(t), &errb, fixedEnv)
			} else {
				code = run(tc.args, strings.NewReader(""), &out, &errb, fixedEnv)
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tc.code, errb.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("stderr lacks %q: %s", w, errb.String())
				}
			}
		})
	}
}

// applyRoot is a host root holding only a containerd config, for config
// apply of kubeadm-qemu-none with --force.
func applyRoot(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "etc/containerd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/containerd/config.toml"), []byte("version = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var applyArgs = []string{"config", "apply", "-p", "kubeadm-qemu-none", "--force", "--containerd-config-version", "3"}

// TestApplyRefusalsExit1: a config apply refused or failed on the node
// exits 1 with a named error, never 2 (the command line was fine) and
// never os.Root's bare "path escapes from parent"; nothing is written
// outside the root.
func TestApplyRefusalsExit1(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, root, outside string)
		want  []string
	}{
		{"conf.d leads out", func(t *testing.T, root, outside string) {
			rel, _ := filepath.Rel(filepath.Join(root, "etc/containerd"), outside)
			must(t, os.Symlink(rel, filepath.Join(root, "etc/containerd/conf.d")))
		}, []string{"refusing /etc/containerd/conf.d/", "outside the host root"}},
		{"prefix leads out", func(t *testing.T, root, outside string) {
			must(t, os.MkdirAll(filepath.Join(root, "opt"), 0o755))
			// An absolute link is the host's: it resolves inside the root
			// (chroot semantics), where its target does not exist.
			must(t, os.Symlink(outside, filepath.Join(root, "opt/berth")))
		}, []string{"refusing /opt/berth/", "does not exist inside the host root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := applyRoot(t, t.TempDir())
			outside := t.TempDir()
			tc.plant(t, root, outside)
			code, _, errOut := runCheckCLI(t, append([]string{"--root", root}, applyArgs...)...)
			if code != ExitNotReady || strings.Contains(errOut, "path escapes") {
				t.Errorf("exit %d, want %d with a named refusal: %s", code, ExitNotReady, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q: %s", w, errOut)
				}
			}
			if ents, _ := os.ReadDir(outside); len(ents) != 0 {
				t.Errorf("wrote %v outside the root", ents)
			}
		})
	}
}

// TestApplyDiskFullExits1: a config apply that runs out of space on the
// node (a full 64 KiB tmpfs) exits 1, not 2, and leaves the config as it
// was. It needs root, to mount the tmpfs.
func TestApplyDiskFullExits1(t *testing.T) {
	testkit.NeedsRoot(t, "mounting a tmpfs")
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "berth-test", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs (this test needs root): %v: %s", err, out)
	}
	// Lazily: the read root of a directory stays open until the garbage
	// collector closes it (hostfs.OpenUnpacking's cleanup is a no-op for
	// a directory).
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	root := applyRoot(t, mnt)
	f, err := os.Create(filepath.Join(mnt, "filler"))
	must(t, err)
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	code, _, errOut := runCheckCLI(t, append([]string{"--root", root}, applyArgs...)...)
	if code != ExitNotReady || !strings.Contains(errOut, "no space left on device") {
		t.Errorf("exit %d, want %d naming the full disk: %s", code, ExitNotReady, errOut)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/containerd/config.toml")); string(b) != "version = 3\n" {
		t.Errorf("config.toml now %q", b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
