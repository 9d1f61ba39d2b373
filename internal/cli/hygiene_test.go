package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/present/report"
	"berth.dev/berth/internal/testkit/treetest"
)

// The host strings of the hostile root: a screen clear (ESC[2J), a window
// title (OSC ... BEL), a colour, DEL, an 8-bit CSI (C1 U+009B) and invalid
// UTF-8.
const (
	hostileVendor  = "Dell\x1b[2J\x1b]0;pwned\x07 Inc.\x7f\xff\xfe \u009b31m end"
	hostilePretty  = "Ubuntu\x1b[2J\x07 24.04\x7f\xff LTS"
	hostileCmdline = "BOOT_IMAGE=/vmlinuz\x1b[31m\x07 root=/dev/sda\x7f\xff ro kvm_amd.sev=1"
)

// hostileRoot is a copy of a fixture host whose DMI vendor, os-release
// PRETTY_NAME, kernel command line, CPU model and a feature file hold
// terminal control sequences, DEL and invalid UTF-8.
func hostileRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	treetest.Copy(t, fixtureRoot, root)
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/class/dmi/id/sys_vendor", hostileVendor+"\n")
	write("proc/cmdline", hostileCmdline+"\n")
	b, err := os.ReadFile(filepath.Join(root, "etc/os-release"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for l := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(l, "PRETTY_NAME=") {
			l = `PRETTY_NAME="` + hostilePretty + `"`
		}
		lines = append(lines, l)
	}
	write("etc/os-release", strings.Join(lines, "\n"))
	cpu, err := os.ReadFile(filepath.Join(root, "proc/cpuinfo"))
	if err != nil {
		t.Fatal(err)
	}
	write("proc/cpuinfo", strings.Replace(string(cpu), "model name\t: ", "model name\t: \x1b[2J\x07\x7f\xff", 1))
	write("etc/berth/features.d/10-site", "good=1\nbad\x1b[2Jkey\x07=x\x7f\n")
	return root
}

// rawControls lists the raw control characters, bidi controls and invalid
// UTF-8 bytes in table output (newlines excepted).
func rawControls(s string) []string {
	var bad []string
	for i, r := range s {
		switch {
		case r == '\n':
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			bad = append(bad, "invalid byte at "+strings.TrimSpace(s[max(0, i-20):i]))
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e:
			bad = append(bad, strings.TrimSpace(s[max(0, i-20):i])+"<"+string(r)+">")
		}
	}
	return bad
}

// asJSON is what JSON and YAML carry of a host string: itself, with each
// invalid UTF-8 byte replaced by U+FFFD (encoding/json's replacement).
func asJSON(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r)
	}
	return b.String()
}

// TestHostStringsEscaped runs facts and check on the hostile root: the
// tables show every control character escaped (ESC as \x1b), JSON and YAML
// exit 0 and decode back to the host's strings.
func TestHostStringsEscaped(t *testing.T) {
	root := hostileRoot(t)
	for _, args := range [][]string{
		{"facts", "--root", root},
		{"check", "--root", root},
		{"check", "--root", root, "--platform", "kubeadm-qemu-snp"},
		{"check", "--root", root, "--all"},
	} {
		code, out, stderr := runCheckCLI(t, args...)
		if code != 0 && code != 1 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if bad := rawControls(out + stderr); len(bad) > 0 {
			t.Errorf("%v: raw control characters in the table: %q", args, bad)
		}
		if args[0] == "facts" {
			for _, want := range []string{`Dell\x1b[2J\x1b]0;pwned\x07 Inc.\x7f\xff\xfe \u009b31m end`, `Ubuntu\x1b[2J\x07 24.04\x7f\xff LTS`, `BOOT_IMAGE=/vmlinuz\x1b[31m\x07 root=/dev/sda\x7f\xff`} {
				if !strings.Contains(out, want) {
					t.Errorf("facts table does not show %s:\n%s", want, out)
				}
			}
		} else if !strings.Contains(out, `\x1b[2J\x07\x7f\xff`) {
			t.Errorf("%v: the CPU model is not shown escaped:\n%s", args, out)
		}
	}

	for _, format := range []string{"json", "yaml"} {
		code, out, stderr := runCheckCLI(t, "facts", "--root", root, "-o", format)
		if code != 0 {
			t.Fatalf("facts -o %s: exit %d: %s", format, code, stderr)
		}
		var f facts.Facts
		if err := decode(format, out, &f); err != nil {
			t.Fatalf("facts -o %s does not decode: %v", format, err)
		}
		for _, c := range [][2]string{
			{f.Virt.DMI.SysVendor, hostileVendor},
			{f.OS.PrettyName, hostilePretty},
			{f.Kernel.Cmdline, hostileCmdline},
		} {
			if c[0] != asJSON(c[1]) {
				t.Errorf("facts -o %s: %q, want %q", format, c[0], asJSON(c[1]))
			}
		}
		if strings.ContainsAny(out, "\x1b\x07\x7f\u009b") {
			t.Errorf("facts -o %s writes a control character raw", format)
		}

		code, out, stderr = runCheckCLI(t, "check", "--root", root, "--platform", "kubeadm-qemu-snp", "-o", format)
		if code != 0 && code != 1 {
			t.Fatalf("check -o %s: exit %d: %s", format, code, stderr)
		}
		var rep report.Report
		if err := decode(format, out, &rep); err != nil {
			t.Fatalf("check -o %s does not decode: %v", format, err)
		}
		if !strings.HasPrefix(rep.Host.CPU, asJSON("\x1b[2J\x07\x7f\xff")) {
			t.Errorf("check -o %s: CPU %q", format, rep.Host.CPU)
		}
	}
}

func decode(format, s string, v any) error {
	if format == "json" {
		return json.Unmarshal([]byte(s), v)
	}
	return yaml.Unmarshal([]byte(s), v)
}
