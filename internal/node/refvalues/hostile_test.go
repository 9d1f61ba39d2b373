package refvalues

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hostileInputs are files that must never be measured: a FIFO (opening
// it blocks until a writer comes), /dev/zero (reading it never ends), a
// sparse 4 GiB file of zeros (larger than any component), an empty file,
// and a bzImage whose setup area (setup_sects 255) runs past its end.
func hostileInputs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(4 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "setup-past-end")
	if err := os.WriteFile(short, setupPastEnd(), 0o644); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"FIFO": fifo, "/dev/zero": "/dev/zero", "4 GiB of zeros": huge, "empty": empty, "setup past the end": short}
}

// setupPastEnd is a 4 KiB file that starts like an EFI-stub bzImage but
// claims 255 setup sectors (128 KiB).
func setupPastEnd() []byte {
	b := make([]byte, 4096)
	copy(b, "MZ")
	b[setupSects] = 255
	binary.LittleEndian.PutUint32(b[setupSysSize:], 0x100)
	copy(b[setupHdrS:], "HdrS")
	binary.LittleEndian.PutUint16(b[setupVersion:], 0x20f)
	b[setupLoadFlags] = 1
	return b
}

// TestHostileComponents gives each hostile file as firmware, kernel and
// initrd, for SNP and TDX: each is refused fast, with an error naming
// the file and what is wrong with it.
func TestHostileComponents(t *testing.T) {
	in := hostileInputs(t)
	want := map[string]string{
		"FIFO": "not a regular file: FIFO", "/dev/zero": "not a regular file: character device",
		"4 GiB of zeros": "is larger than", "empty": "is empty", "setup past the end": "runs past the end",
	}
	acpi := readACPIDir(t, "acpi-qemu7.2-2048")
	cmdline := "console=hvc0"
	for name, path := range in {
		for _, role := range []string{"firmware", "kernel", "initrd"} {
			if name == "setup past the end" && role != "kernel" {
				continue // only a kernel has a setup area
			}
			for _, tee := range []string{"snp", "tdx"} {
				t.Run(tee+"/"+role+"/"+name, func(t *testing.T) {
					// put gives the hostile file as the role's component.
					put := func(firmware, kernel, initrd *Component) {
						*map[string]*Component{"firmware": firmware, "kernel": kernel, "initrd": initrd}[role] = File(path)
					}
					var run func() error
					switch tee {
					case "snp":
						r := SNPRequest{Firmware: File("testdata/OVMF.amdsev.fd"), Kernel: File("testdata/kernel-synthetic.bin"),
							VCPUs: VCPURange{1, 1}, GuestFeatures: 1, GuestPolicy: DefaultGuestPolicy}
						put(&r.Firmware, &r.Kernel, &r.Initrd)
						run = func() error { _, err := SNP(r); return err }
					case "tdx":
						rt := &TDXRTMRRequest{Kernel: File("testdata/kernel-synthetic.bin"), Cmdline: &cmdline, MemoryMiB: 2048,
							ACPI: acpi, QEMU: [3]int{10, 0, 0}}
						r := TDXRequest{Firmware: File("testdata/OVMF.debian12u1.fd"), RTMR: rt}
						put(&r.Firmware, &rt.Kernel, &rt.Initrd)
						run = func() error { _, err := TDX(r); return err }
					}
					done := make(chan error, 1)
					start := time.Now()
					go func() { done <- run() }()
					select {
					case err := <-done:
						if err == nil || !strings.Contains(err.Error(), want[name]) || !strings.Contains(err.Error(), path) {
							t.Errorf("error %v, want one naming %s and saying %q", err, path, want[name])
						}
						if d := time.Since(start); d > 2*time.Second {
							t.Errorf("refused after %v: the input was read, not refused", d)
						}
					case <-time.After(10 * time.Second):
						t.Fatalf("%s as the %s: no answer after 10s (blocked or reading without end)", name, role)
					}
				})
			}
		}
	}
}

// TestCheckSetup: the setup-header bounds against the file size, on
// real-shaped headers; a file without "HdrS" is left to the caller.
func TestCheckSetup(t *testing.T) {
	hdr := func(sects byte, sys uint32, size int) []byte {
		b := make([]byte, size)
		copy(b[setupHdrS:], "HdrS")
		binary.LittleEndian.PutUint16(b[setupVersion:], 0x20f)
		b[setupSects] = sects
		binary.LittleEndian.PutUint32(b[setupSysSize:], sys)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"whole", hdr(3, 0x100, 4*512+0x1000), true},
		{"syssize rounded up", hdr(3, 0x100, 4*512+0x1000-15), true},
		{"signed (bytes after)", hdr(3, 0x100, 4*512+0x1000+1472), true},
		{"setup_sects 0 means 4", hdr(0, 0x10, 5*512+0x100), true},
		{"setup past the end", hdr(255, 0x100, 4096), false},
		{"kernel cut short", hdr(3, 0x100, 4*512+0x1000-16), false},
		{"no protected-mode kernel", hdr(3, 0, 4096), false},
		{"no HdrS", make([]byte, 4096), true},
	} {
		err := checkSetup(tc.b, int64(len(tc.b)))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
