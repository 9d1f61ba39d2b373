package probe

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/testproc"
)

// realQEMU returns the QEMU the tests run, failing loudly when it is not
// installed: the probe must be tested against a real QEMU.
func realQEMU(tb testing.TB) string {
	tb.Helper()
	testkit.NeedsTools(tb, "QEMU (Debian's qemu-system-x86)")
	p, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		tb.Fatalf("qemu-system-x86_64 not found (%v): run `make tools` (installs Debian's qemu-system-x86)", err)
	}
	return p
}

// kvmUsable says whether this machine can create a KVM VM, which is what
// query-kvm's "enabled" must then say.
func kvmUsable() bool {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	vm, err := unix.IoctlRetInt(fd, 0xAE01) // KVM_CREATE_VM
	if err != nil {
		return false
	}
	unix.Close(vm)
	return true
}

func TestQEMURealBinary(t *testing.T) {
	bin := realQEMU(t)
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	wantVersion := regexp.MustCompile(`version (\d+\.\d+\.\d+)`).FindSubmatch(out)
	if wantVersion == nil {
		t.Fatalf("no version in %q", out)
	}

	p, err := QEMU(context.Background(), bin, 0)
	if err != nil {
		t.Fatalf("QEMU probe: %v", err)
	}
	t.Logf("probe: %+v", *p)
	if !p.Ran || p.Error != "" {
		t.Errorf("Ran=%v Error=%q, want Ran and no error", p.Ran, p.Error)
	}
	if p.Version != string(wantVersion[1]) {
		t.Errorf("Version=%q, want %q from --version", p.Version, wantVersion[1])
	}
	if p.Package == "" {
		t.Errorf("Package empty, want the distributor's package string")
	}
	// Debian builds QEMU with KVM support; whether it can use it depends
	// on this machine.
	if !p.KVMPresent {
		t.Errorf("KVMPresent=false, want true for a Debian build")
	}
	if want := kvmUsable(); p.KVMEnabled != want {
		t.Errorf("KVMEnabled=%v, want %v (KVM_CREATE_VM on /dev/kvm)", p.KVMEnabled, want)
	}
	// x86 QEMU has had sev-guest since 2.12; SNP and TDX types are newer.
	if !slices.Contains(p.ConfidentialTypes, "sev-guest") {
		t.Errorf("ConfidentialTypes=%v, want sev-guest among them", p.ConfidentialTypes)
	}
	for _, ty := range p.ConfidentialTypes {
		if !slices.Contains([]string{"sev-guest", "sev-snp-guest", "tdx-guest"}, ty) {
			t.Errorf("unexpected confidential type %q", ty)
		}
	}
	// Without SEV in the host kernel QEMU answers with an error, which is
	// recorded.
	if !p.SEVCapabilities && p.SEVError == "" {
		t.Errorf("query-sev-capabilities neither answered nor gave an error")
	}
	if p.DurationMS <= 0 || p.DurationMS > 5000 {
		t.Errorf("DurationMS=%d", p.DurationMS)
	}
}

// script writes an executable shell script into a temporary directory.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "qemu")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestQEMUFailures(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		timeout time.Duration
		wantErr string
		maxTime time.Duration
	}{
		{
			name:    "hangs",
			body:    "sleep 4242.0001",
			timeout: 300 * time.Millisecond,
			wantErr: "timed out after 300ms",
			maxTime: 30 * time.Second,
		},
		{
			name: "hangs after greeting",
			body: `echo '{"QMP": {"version": {"qemu": {"micro": 0, "minor": 0, "major": 9}, "package": ""}, "capabilities": []}}'
sleep 4242.0002`,
			timeout: 300 * time.Millisecond,
			wantErr: "timed out after 300ms",
			maxTime: 30 * time.Second,
		},
		{
			name:    "exits immediately",
			body:    "echo 'qemu: could not load PC BIOS' >&2; exit 1",
			timeout: time.Minute,
			wantErr: "could not load PC BIOS",
			maxTime: 30 * time.Second,
		},
		{
			name:    "not qmp",
			body:    "echo hello",
			timeout: time.Minute,
			wantErr: "expected a JSON object",
			maxTime: 30 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := script(t, tt.body)
			start := time.Now()
			p, err := QEMU(context.Background(), bin, tt.timeout)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err=%v, want one containing %q", err, tt.wantErr)
			}
			if p == nil || p.Ran || p.Error != err.Error() || p.Binary != bin {
				t.Errorf("probe=%+v, want Ran false, Error set, Binary %s", p, bin)
			}
			if took > tt.maxTime {
				t.Errorf("took %s, want under %s", took, tt.maxTime)
			}
			// The fake QEMUs sleep 4242.000N seconds, which marks their processes.
			if testproc.MarkerAlive(t, "4242.000") {
				t.Errorf("a process of the fake qemu survived")
			}
		})
	}
}

func TestQEMUMissingBinary(t *testing.T) {
	_, err := QEMU(context.Background(), filepath.Join(t.TempDir(), "nope"), time.Second)
	if err == nil || !strings.Contains(err.Error(), "starting") {
		t.Fatalf("err=%v, want a start error", err)
	}
}

func BenchmarkQEMUProbe(b *testing.B) {
	bin := realQEMU(b)
	for b.Loop() {
		if _, err := QEMU(context.Background(), bin, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// TestQEMUDiesWithBerth: the probed QEMU is killed when berth dies, even
// by SIGKILL (its parent-death signal), so that a read that does not
// subscribe to signals leaves no QEMU running. The test binary runs
// itself as "berth", probing a fake QEMU that hangs, and is killed.
func TestQEMUDiesWithBerth(t *testing.T) {
	if bin := os.Getenv("BERTH_TEST_PROBE"); bin != "" {
		QEMU(context.Background(), bin, time.Minute)
		os.Exit(0)
	}
	bin := script(t, "exec sleep 4242.0009")
	berth := exec.Command(os.Args[0], "-test.run=^TestQEMUDiesWithBerth$")
	berth.Env = append(os.Environ(), "BERTH_TEST_PROBE="+bin)
	if err := berth.Start(); err != nil {
		t.Fatal(err)
	}
	defer testproc.KillMarked(t, "4242.0009")
	if !testproc.WaitMarker(t, "4242.0009", true, 10*time.Second) {
		berth.Process.Kill()
		t.Fatal("the fake QEMU did not start")
	}
	berth.Process.Kill()
	berth.Wait()
	if !testproc.WaitMarker(t, "4242.0009", false, 5*time.Second) {
		t.Fatal("the fake QEMU outlived berth by 5 s")
	}
}
