package discover

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit"
)

// hostTree writes files (relative path -> content) under a new temporary
// directory and returns it.
func hostTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func offlineSession(t *testing.T, files map[string]string, opt Options) *session {
	t.Helper()
	root, err := hostfs.OpenDir(hostTree(t, files))
	if err != nil {
		t.Fatal(err)
	}
	return &session{root: root, opt: opt}
}

func liveSession(t *testing.T, dir string, opt Options) *session {
	t.Helper()
	root, err := hostfs.NewLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &session{root: root, opt: opt}
}

// unknownsOf returns the unknown facts of s by field.
func unknownsOf(s *session) map[string]string {
	m := map[string]string{}
	for _, u := range s.unknown {
		m[u.Field] = u.Reason
	}
	return m
}

func TestQEMUProbeLive(t *testing.T) {
	testkit.NeedsTools(t, "QEMU (Debian's qemu-system-x86)")
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatalf("qemu-system-x86_64 not found: run `make tools` (installs Debian's qemu-system-x86)")
	}
	// The distribution's QEMU is probed only when named (berth check
	// --hypervisor-path).
	s := liveSession(t, "/", Options{Probe: true, QEMUPath: "/usr/bin/qemu-system-x86_64"})
	var f facts.Facts
	runQEMUProbe(context.Background(), s, &f)
	p := f.QEMUProbe
	if p == nil || !p.Ran || p.Binary != "/usr/bin/qemu-system-x86_64" || p.Version == "" || p.Recorded {
		t.Fatalf("probe = %+v, unknown %v", p, unknownsOf(s))
	}
	if len(s.unknown) != 0 {
		t.Errorf("unknown = %v", unknownsOf(s))
	}
	t.Logf("probe: %+v", *p)
}

func TestQEMUProbeNotRun(t *testing.T) {
	tests := []struct {
		name string
		s    func(t *testing.T) *session
		want string
	}{
		{"no-probe", func(t *testing.T) *session { return liveSession(t, "/", Options{}) }, "not run: disabled (--no-probe)"},
		{"mounted live root", func(t *testing.T) *session {
			return liveSession(t, hostTree(t, map[string]string{"usr/bin/qemu-system-x86_64": "#!/bin/sh\ntouch /tmp/berth-must-not-run\n"}), Options{Probe: true})
		}, "not run: qemu probe: only on the live / root"},
		{"offline", func(t *testing.T) *session {
			return offlineSession(t, map[string]string{"usr/bin/qemu-system-x86_64": "#!/bin/sh\n"}, Options{Probe: true})
		}, "offline root"},
		{"offline bad record", func(t *testing.T) *session {
			return offlineSession(t, map[string]string{".berth/recorded.json": `{"schemaVersion":1,"probes":{"qemu":{"ran":"yes"}}}`}, Options{Probe: true})
		}, "unparseable: decoding recorded probe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s(t)
			var f facts.Facts
			runQEMUProbe(context.Background(), s, &f)
			if f.QEMUProbe != nil {
				t.Errorf("probe = %+v, want none", f.QEMUProbe)
			}
			if got := unknownsOf(s)["qemuProbe"]; !strings.HasPrefix(got, tt.want) {
				t.Errorf("unknown qemuProbe = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestQEMUProbeRecorded(t *testing.T) {
	s := offlineSession(t, map[string]string{
		".berth/recorded.json": `{"schemaVersion":1,"probes":{"qemu":{"binary":"/usr/bin/qemu-system-x86_64","ran":true,"version":"9.1.0","kvmPresent":true,"kvmEnabled":true,"confidentialTypes":["sev-guest","sev-snp-guest"],"sevCapabilities":true}}}`,
	}, Options{Probe: true})
	var f facts.Facts
	runQEMUProbe(context.Background(), s, &f)
	want := facts.QEMUProbe{Binary: "/usr/bin/qemu-system-x86_64", Ran: true, Version: "9.1.0", KVMPresent: true, KVMEnabled: true,
		ConfidentialTypes: []string{"sev-guest", "sev-snp-guest"}, SEVCapabilities: true, Recorded: true}
	if f.QEMUProbe == nil || f.QEMUProbe.Version != want.Version || !f.QEMUProbe.Recorded || len(f.QEMUProbe.ConfidentialTypes) != 2 {
		t.Errorf("probe = %+v, want %+v", f.QEMUProbe, want)
	}
	if len(s.unknown) != 0 {
		t.Errorf("unknown = %v", unknownsOf(s))
	}
}

func TestFindQEMU(t *testing.T) {
	for name, tt := range map[string]struct {
		files map[string]string
		want  string
		path  string
	}{
		"none": {map[string]string{"usr/bin/true": ""}, "", ""},
		"kata": {map[string]string{"opt/kata/bin/qemu-system-x86_64": ""}, "opt/kata/bin/qemu-system-x86_64", ""},
		"berth before kata": {map[string]string{"opt/kata/bin/qemu-system-x86_64": "", "opt/berth/bin/qemu-system-x86_64": ""},
			"opt/berth/bin/qemu-system-x86_64", ""},
		// A distribution's QEMU runs only when configured: it is not
		// what the platform runs, so it is not probed unless named.
		"distribution only": {map[string]string{"usr/libexec/qemu-kvm": "", "usr/bin/qemu-system-x86_64": ""}, "", ""},
		"named":             {map[string]string{"opt/kata/bin/qemu-system-x86_64": "", "usr/libexec/qemu-kvm": ""}, "usr/libexec/qemu-kvm", "/usr/libexec/qemu-kvm"},
		"named, missing":    {map[string]string{"opt/kata/bin/qemu-system-x86_64": ""}, "", "usr/bin/qemu-system-x86_64"},
	} {
		if got := offlineSession(t, tt.files, Options{QEMUPath: tt.path}).findQEMU(); got != tt.want {
			t.Errorf("%s: findQEMU = %q, want %q", name, got, tt.want)
		}
	}
}
