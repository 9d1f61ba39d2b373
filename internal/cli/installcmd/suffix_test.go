package installcmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/cli"
)

// TestInstallSuffixSideBySide installs one platform twice on a k3s
// fixture, unsuffixed and with --install-suffix blue: each in its own
// prefix, with its own handler in the shared k3s template. Uninstalling
// blue leaves the unsuffixed install's files and handler; a bad suffix is
// refused with exit 2 before anything is written.
func TestInstallSuffixSideBySide(t *testing.T) {
	rel := makeCLIRelease(t, "http://127.0.0.1:9/unplugged")
	mp, mirror := rel.write(t)
	root := copyInstallRoot(t)
	args := []string{"--root", root, "install", "-p", "k3s-qemu-snp", "-m", mp, "--from", mirror}

	code, _, errOut := runCheckCLI(t, append(args, "--install-suffix", "Blue")...)
	if code != cli.ExitUsage || !strings.Contains(errOut, `--install-suffix "Blue"`) {
		t.Fatalf("bad suffix: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/berth-Blue")); err == nil {
		t.Fatal("a refused suffix created its prefix")
	}

	for _, extra := range [][]string{nil, {"--install-suffix", "blue"}} {
		if code, out, errOut := runCheckCLI(t, append(args, extra...)...); code != 0 {
			t.Fatalf("install %v: exit %d\n%s\n%s", extra, code, out, errOut)
		}
	}
	assertSNPLayout(t, root, rel)
	tmpl := filepath.Join(root, "var/lib/rancher/k3s/agent/etc/containerd/config-v3.toml.tmpl")
	if _, err := os.Stat(tmpl); err != nil {
		tmpl = filepath.Join(root, "var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl")
	}
	has := func(handler string) bool {
		data, _ := os.ReadFile(tmpl)
		return strings.Contains(string(data), "runtimes."+handler+"]") || strings.Contains(string(data), "runtimes.'"+handler+"']")
	}
	if !has("kata-qemu-snp") || !has("kata-qemu-snp-blue") {
		data, _ := os.ReadFile(tmpl)
		t.Fatalf("both handlers should be in %s:\n%s", tmpl, data)
	}
	kc, err := os.ReadFile(filepath.Join(root, "opt/berth-blue/etc/kata/k3s-qemu-snp-blue.toml"))
	if err != nil || !strings.Contains(string(kc), "/opt/berth-blue/") || strings.Contains(string(kc), "/opt/berth/") {
		t.Errorf("blue's Kata configuration (%v) should name /opt/berth-blue only:\n%s", err, kc)
	}
	if _, err := os.Lstat(filepath.Join(root, "opt/berth-blue/current")); err != nil {
		t.Errorf("blue's prefix has no current installation: %v", err)
	}

	code, out, errOut := runCheckCLI(t, "--root", root, "uninstall", "--install-suffix", "blue")
	if code != 0 {
		t.Fatalf("uninstall blue: exit %d\n%s\n%s", code, out, errOut)
	}
	if has("kata-qemu-snp-blue") || !has("kata-qemu-snp") {
		data, _ := os.ReadFile(tmpl)
		t.Errorf("after uninstalling blue, only kata-qemu-snp should be left:\n%s", data)
	}
	if _, err := os.Lstat(filepath.Join(root, "opt/berth-blue/current")); err == nil {
		t.Error("blue's current installation left after its uninstall")
	}
	assertSNPLayout(t, root, rel)
	if _, err := os.Stat(filepath.Join(root, "opt/berth/etc/kata/k3s-qemu-snp.toml")); err != nil {
		t.Errorf("the unsuffixed install's Kata configuration: %v", err)
	}
}
