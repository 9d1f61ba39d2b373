package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestConfigCustomDistribution configures a custom distribution, whose
// containerd keeps its config where no known distribution does: apply
// needs the paths as flags, records them, and remove needs none and
// restores the node byte for byte.
func TestConfigCustomDistribution(t *testing.T) {
	root := t.TempDir()
	main := filepath.Join(root, "srv/ctr/config.toml")
	if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
		t.Fatal(err)
	}
	orig := "version = 3\n\n[plugins.'io.containerd.cri.v1.runtime'.containerd]\n  default_runtime_name = 'runc'\n"
	if err := os.WriteFile(main, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--containerd-config", "/srv/ctr/config.toml", "--runtime-unit", "ctr.service", "--containerd-config-version", "3"}
	apply := append([]string{"--root", root, "config", "apply", "-p", "custom-qemu-none", "--force"}, flags...)

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no paths", []string{"--root", root, "config", "apply", "-p", "custom-qemu-none", "--force"}, "--containerd-config or --crio-config"},
		{"no unit", []string{"--root", root, "config", "render", "-p", "custom-qemu-none", "--containerd-config", "/srv/ctr/config.toml"}, "systemd unit is required"},
		{"known distribution", []string{"--root", root, "config", "render", "-p", "kubeadm-qemu-none", "--containerd-config", "/srv/ctr/config.toml"}, "for the custom distribution"},
		{"both runtimes", []string{"--root", root, "config", "render", "-p", "custom-qemu-none", "--containerd-config", "a", "--crio-config", "b", "--runtime-unit", "u"}, "give one"},
		{"unit with a newline", []string{"--root", root, "config", "render", "-p", "custom-qemu-none", "--containerd-config", "/srv/ctr/config.toml", "--runtime-unit", "ctr.service\nExecStartPre=/bin/sh"}, "--runtime-unit"},
		{"unit with a space", []string{"--root", root, "config", "render", "-p", "custom-qemu-none", "--containerd-config", "/srv/ctr/config.toml", "--runtime-unit", "ctr.service; reboot"}, "--runtime-unit"},
		{"unit without its type", []string{"--root", root, "config", "render", "-p", "custom-qemu-none", "--containerd-config", "/srv/ctr/config.toml", "--runtime-unit", "ctr"}, "--runtime-unit"},
		{"prefix with a newline", []string{"--root", root, "config", "render", "-p", "kubeadm-qemu-snp", "--containerd-config-version", "3", "--prefix", "/opt/x\nExecStartPre=/bin/sh"}, "--prefix"},
		{"prefix with a quote", []string{"--root", root, "config", "render", "-p", "kubeadm-qemu-snp", "--containerd-config-version", "3", "--prefix", "/opt/x\"y"}, "--prefix"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runCheckCLI(t, tt.args...)
			if code != ExitUsage || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, stderr %s; want exit %d naming %q", code, errOut, ExitUsage, tt.want)
			}
		})
	}

	// berth check reads the runtime from the same paths.
	code, out, errOut := runCheckCLI(t, append([]string{"--root", root, "check", "-p", "custom-qemu-none"}, flags[:4]...)...)
	if !regexp.MustCompile(`Checking if the runtime configuration parses \.+ PASS`).MatchString(out) {
		t.Errorf("check of the custom runtime: exit %d\n%s\n%s", code, out, errOut)
	}
	// ... and only from them: a broken file there fails the check.
	broken := t.TempDir()
	os.MkdirAll(filepath.Join(broken, "srv/ctr"), 0o755)
	os.WriteFile(filepath.Join(broken, "srv/ctr/config.toml"), []byte("version = 3\n[plugins\n"), 0o644)
	_, out, _ = runCheckCLI(t, append([]string{"--root", broken, "check", "-p", "custom-qemu-none"}, flags[:4]...)...)
	if !regexp.MustCompile(`Checking if the runtime configuration parses \.+ FAIL`).MatchString(out) || !strings.Contains(out, "srv/ctr/config.toml") {
		t.Errorf("check of a broken custom config:\n%s", out)
	}
	if c, _, e := runCheckCLI(t, "--root", root, "check", "-p", "kubeadm-qemu-none", "--containerd-config", "/srv/ctr/config.toml"); c != ExitUsage {
		t.Errorf("check with custom paths on a known distribution: exit %d, %s", c, e)
	}
	code, out, errOut = runCheckCLI(t, apply...)
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	dropIn := filepath.Join(root, "srv/ctr/conf.d/berth-kata-qemu.toml")
	if b, err := os.ReadFile(dropIn); err != nil || !strings.Contains(string(b), "runtimes.kata-qemu]") {
		t.Errorf("drop-in %s: %v\n%s", dropIn, err, b)
	}
	got, _ := os.ReadFile(main)
	// containerd resolves a relative import against its main config's
	// directory: conf.d beside /srv/ctr/config.toml.
	if !strings.Contains(string(got), `imports = ["conf.d/*.toml"]`) {
		t.Errorf("main config does not import the drop-in directory beside it:\n%s", got)
	}
	// The state records the paths, so that remove and restart need none.
	var st struct {
		Platforms map[string]struct {
			Layout *struct {
				Config string   `json:"config"`
				Units  []string `json:"units"`
			} `json:"layout"`
		} `json:"platforms"`
	}
	b, err := os.ReadFile(filepath.Join(root, "var/lib/berth/config-state.json"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("state: %v\n%s", err, b)
	}
	if l := st.Platforms["kata-qemu"].Layout; l == nil || l.Config != "srv/ctr/config.toml" || len(l.Units) != 1 || l.Units[0] != "ctr.service" {
		t.Errorf("state layout %+v", l)
	}
	if code, out, _ := runCheckCLI(t, apply...); code != 0 || !strings.Contains(out, "nothing to change") {
		t.Errorf("second apply: exit %d\n%s", code, out)
	}
	// Without --restart, the commands to load the change name the unit.
	if !strings.Contains(out+errOut, "ctr.service") {
		t.Errorf("apply does not name the runtime's unit:\n%s\n%s", out, errOut)
	}
	code, out, errOut = runCheckCLI(t, "--root", root, "config", "remove", "--all")
	if code != 0 {
		t.Fatalf("remove: exit %d\n%s\n%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(main); string(got) != orig {
		t.Errorf("remove did not restore %s:\n%s", main, got)
	}
	if _, err := os.Stat(filepath.Join(root, "srv/ctr/conf.d")); !os.IsNotExist(err) {
		t.Errorf("conf.d left behind: %v", err)
	}
}

// TestConfigHypervisorPath renders a platform that runs a distribution's
// QEMU: the Kata configuration names it (and allows only it), and a
// relative path or a platform without a hypervisor binary is refused.
func TestConfigHypervisorPath(t *testing.T) {
	code, out, errOut := runCheckCLI(t, "--root", filepath.Join(hostsDir, "snp-genoa-k3s-ready"), "config", "render", "-p", "k3s-qemu-none",
		"--hypervisor-path", "/usr/bin/qemu-system-x86_64")
	if code != 0 || !strings.Contains(out, `path = "/usr/bin/qemu-system-x86_64"`) ||
		!strings.Contains(out, `valid_hypervisor_paths = ["/usr/bin/qemu-system-x86_64"]`) || strings.Contains(out, "/opt/berth/bin/qemu-system-x86_64") {
		t.Errorf("render with --hypervisor-path: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"-p", "k3s-qemu-none", "--hypervisor-path", "usr/bin/qemu-system-x86_64"},
		{"-p", "k3s-dragonball-none", "--hypervisor-path", "/usr/bin/qemu-system-x86_64"},
	} {
		if code, _, errOut := runCheckCLI(t, append([]string{"--root", filepath.Join(hostsDir, "snp-genoa-k3s-ready"), "config", "render"}, args...)...); code != ExitUsage || !strings.Contains(errOut, "--hypervisor-path") {
			t.Errorf("%v: exit %d, %s", args, code, errOut)
		}
	}
}

// TestConfigKataConfigDir writes the Kata configuration where the site
// keeps it: the handler points there, and remove (no flags) takes it away.
func TestConfigKataConfigDir(t *testing.T) {
	root := t.TempDir()
	apply := []string{"--root", root, "config", "apply", "-p", "kubeadm-qemu-none", "--force", "--containerd-config-version", "3", "--kata-config-dir", "/etc/kata-containers/berth"}
	if code, out, errOut := runCheckCLI(t, apply...); code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/kata-containers/berth/kubeadm-qemu-none.toml")); err != nil {
		t.Errorf("Kata configuration not in --kata-config-dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/berth/etc/kata")); !os.IsNotExist(err) {
		t.Errorf("Kata configuration also under the prefix: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "etc/containerd/conf.d/berth-kata-qemu.toml"))
	if !strings.Contains(string(b), `ConfigPath = "/etc/kata-containers/berth/kubeadm-qemu-none.toml"`) {
		t.Errorf("handler does not point at the Kata configuration:\n%s", b)
	}
	if code, out, errOut := runCheckCLI(t, "--root", root, "config", "remove", "--all"); code != 0 {
		t.Fatalf("remove: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/kata-containers")); !os.IsNotExist(err) {
		t.Errorf("remove left the Kata configuration directory: %v", err)
	}
	if code, _, errOut := runCheckCLI(t, "--root", root, "config", "render", "-p", "kubeadm-qemu-none", "--kata-config-dir", "etc/kata"); code == 0 || !strings.Contains(errOut, "absolute") {
		t.Errorf("relative --kata-config-dir: exit %d, %s", code, errOut)
	}
}
