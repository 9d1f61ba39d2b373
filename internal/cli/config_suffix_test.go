package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigInstallSuffix applies one platform unsuffixed and with two
// suffixes into a copy of the RKE2 fixture (one shared template), then
// removes one install with --all: the other installs' handlers stay, and
// removing them restores the template byte for byte.
func TestConfigInstallSuffix(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join(hostsDir, "rke2-containerd-v3"))); err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(root, "var/lib/rancher/rke2/agent/etc/containerd/config-v3.toml.tmpl")
	orig, err := os.ReadFile(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"", "a", "b"} {
		args := []string{"--root", root, "config", "apply", "-p", "rke2-qemu-none", "--force"}
		if s != "" {
			args = append(args, "--install-suffix", s)
		}
		if code, out, errOut := runCheckCLI(t, args...); code != 0 {
			t.Fatalf("apply suffix %q: exit %d\n%s\n%s", s, code, out, errOut)
		}
	}
	has := func(handlers ...string) {
		t.Helper()
		got, _ := os.ReadFile(tmpl)
		for _, h := range []string{"kata-qemu", "kata-qemu-a", "kata-qemu-b"} {
			want := strings.Contains(strings.Join(handlers, " ")+" ", h+" ")
			if on := strings.Contains(string(got), "runtimes."+h+"]"); on != want {
				t.Errorf("handler %s in the template: %v, want %v", h, on, want)
			}
		}
		for _, s := range []string{"", "-a", "-b"} {
			h := "kata-qemu" + s
			want := strings.Contains(strings.Join(handlers, " ")+" ", h+" ")
			_, err := os.Stat(filepath.Join(root, "opt/berth"+s, "etc/kata", "rke2-qemu-none"+s+".toml"))
			if (err == nil) != want {
				t.Errorf("Kata configuration of %s present: %v, want %v", h, err == nil, want)
			}
		}
	}
	has("kata-qemu", "kata-qemu-a", "kata-qemu-b")

	code, out, errOut := runCheckCLI(t, "--root", root, "config", "remove", "--all", "--install-suffix", "a")
	if code != 0 || !strings.Contains(out, "kata-qemu-a: removed") {
		t.Fatalf("remove --all of suffix a: exit %d\n%s\n%s", code, out, errOut)
	}
	has("kata-qemu", "kata-qemu-b")
	code, out, errOut = runCheckCLI(t, "--root", root, "config", "remove", "-p", "rke2-qemu-none", "--install-suffix", "b")
	if code != 0 || !strings.Contains(out, "kata-qemu-b: removed") {
		t.Fatalf("remove suffix b: exit %d\n%s\n%s", code, out, errOut)
	}
	has("kata-qemu")
	if code, out, errOut = runCheckCLI(t, "--root", root, "config", "remove", "--all"); code != 0 {
		t.Fatalf("remove --all: exit %d\n%s\n%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(tmpl); string(got) != string(orig) {
		t.Errorf("template not restored byte for byte:\n%s", got)
	}
}

// TestConfigBadSuffix refuses a bad --install-suffix with exit 2, naming
// the flag and the rule, before anything is written.
func TestConfigBadSuffix(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"upper case", []string{"config", "apply", "-p", "rke2-qemu-none", "--force", "--install-suffix", "Blue"}, `--install-suffix "Blue": expected lower-case letters`},
		{"path", []string{"config", "apply", "-p", "rke2-qemu-none", "--force", "--install-suffix", "../etc"}, `--install-suffix "../etc"`},
		{"too long", []string{"config", "render", "-p", "rke2-qemu-none", "--install-suffix", strings.Repeat("x", 22)}, "expected at most 21"},
		{"remove", []string{"config", "remove", "--all", "--install-suffix", "a_b"}, `--install-suffix "a_b"`},
		{"label too long", []string{"config", "apply", "-p", "rke2-cloud-hypervisor-none+debug+rust+devmapper", "--force", "--install-suffix", "abcdef"}, "more than 63"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.CopyFS(root, os.DirFS(filepath.Join(hostsDir, "rke2-containerd-v3"))); err != nil {
				t.Fatal(err)
			}
			before := treeOf(t, root)
			code, _, errOut := runCheckCLI(t, append([]string{"--root", root}, tc.args...)...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %s; want exit %d saying %q", code, errOut, ExitUsage, tc.want)
			}
			if after := treeOf(t, root); after != before {
				t.Errorf("a refused suffix changed the host:\n%s", after)
			}
		})
	}
}

// treeOf lists every file under dir with its size, to see that nothing
// was written.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d\n", rel, fi.Mode(), fi.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
