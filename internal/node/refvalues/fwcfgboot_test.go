package refvalues

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit"
)

// testQEMU returns the QEMU of the given major version the vectors were
// made with: Debian 12's 7.2 (qemu-system-x86_64 in PATH) or
// bookworm-backports' 10.0.2, which .ci/qemu10.sh unpacks outside the
// system and exports as BERTH_QEMU10.
func testQEMU(t *testing.T, major int) string {
	t.Helper()
	var q string
	switch major {
	case 7:
		testkit.NeedsTools(t, "QEMU 7.2 (Debian 12's)")
		var err error
		if q, err = exec.LookPath("qemu-system-x86_64"); err != nil {
			t.Fatal("qemu-system-x86_64 not found: .ci/tools.sh installs qemu-system-x86")
		}
	case 10:
		testkit.NeedsTools(t, "QEMU 10 (BERTH_QEMU10)")
		if q = os.Getenv("BERTH_QEMU10"); q == "" {
			t.Fatal("BERTH_QEMU10 is not set: run `. .ci/tools.env` (tools.sh runs .ci/qemu10.sh)")
		}
	default:
		t.Fatalf("no test QEMU of major version %d", major)
	}
	ver, err := QEMUVersion(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if ver[0] != major {
		t.Fatalf("%s is QEMU %d.%d.%d, the vectors need QEMU %d", q, ver[0], ver[1], ver[2], major)
	}
	return q
}

// fwcfgVector computes a *-fwcfg row of vectors-rtmr.psv from what the real
// QEMU hands over: the request carries no memory size, so the model (which
// needs it to place an initrd) cannot stand in for QEMU.
func fwcfgVector(t *testing.T, row []string, req RTMRRequest) {
	major, err := strconv.Atoi(row[4])
	if err != nil {
		t.Fatal(err)
	}
	mem, err := strconv.ParseUint(row[5], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := DumpBootBlobs(context.Background(), KataTDXMachine(testQEMU(t, major), mem, 1, 1), req.Kernel, req.Initrd, req.Cmdline)
	if err != nil {
		t.Fatal(err)
	}
	req.FwCfg, req.MemoryMiB, req.QEMUMajor = boot, 0, major
	if !bytes.Equal(boot.Initrd, req.Initrd) {
		t.Fatalf("QEMU handed over an initrd of %d bytes, given %d", len(boot.Initrd), len(req.Initrd))
	}
	checkBootVector(t, strings.TrimSuffix(row[1], "-fwcfg"), req, row[8])
}

// TestBootBlobsModel checks the fallback model against QEMU itself: for
// Debian's QEMU 7.2 the setup header the model patches is byte for byte
// the FW_CFG_SETUP_DATA QEMU hands over, for each memory size that moves
// the initrd; for QEMU 10 the firmware's kernel is the file unchanged.
func TestBootBlobsModel(t *testing.T) {
	kernel := debianKernel(t)
	initrd := readTestdata(t, "initrd-synthetic.bin")
	for _, major := range []int{7, 10} {
		q := testQEMU(t, major)
		for _, mem := range []uint64{1024, 2048, 2815, 2816, 4096} {
			for _, withInitrd := range []bool{false, true} {
				req := RTMRRequest{Kernel: kernel, MemoryMiB: mem, QEMUMajor: major}
				if withInitrd {
					req.Initrd = initrd
				}
				t.Run(strings.Join([]string{strconv.Itoa(major), strconv.FormatUint(mem, 10), strconv.FormatBool(withInitrd)}, "-"), func(t *testing.T) {
					boot, err := DumpBootBlobs(context.Background(), KataTDXMachine(q, mem, 1, 1), kernel, req.Initrd, "console=hvc0")
					if err != nil {
						t.Fatal(err)
					}
					model, err := measuredKernel(req)
					if err != nil {
						t.Fatal(err)
					}
					got := boot.FirmwareKernel(major)
					if !bytes.Equal(got, model) {
						for i := range min(len(got), len(model)) {
							if got[i] != model[i] {
								t.Fatalf("model's kernel differs from QEMU's first at offset %#x: %#x, QEMU %#x (%d and %d bytes)", i, model[i], got[i], len(model), len(got))
							}
						}
						t.Fatalf("model's kernel has %d bytes, QEMU's %d", len(model), len(got))
					}
					if major >= 10 && !bytes.Equal(boot.BootKernel, kernel) {
						t.Errorf("QEMU %d offers no unpatched %s", major, fwCfgBootKernel)
					}
					if withInitrd {
						addr, _ := qemuInitrdAddr(kernel, uint32(len(initrd)), q35LowMem(mem<<20))
						if boot.InitrdAddr != addr {
							t.Errorf("QEMU placed the initrd at %#x, the model at %#x", boot.InitrdAddr, addr)
						}
					}
				})
			}
		}
	}
}

// TestCachedBootBlobs checks that the entry is written once, small (no
// copy of the kernel), read back equal without asking QEMU, and that a
// damaged or foreign entry is replaced rather than trusted.
func TestCachedBootBlobs(t *testing.T) {
	kernel := debianKernel(t)
	initrd := readTestdata(t, "initrd-synthetic.bin")
	q := testQEMU(t, 10)
	dir := t.TempDir()
	m := KataTDXMachine(q, 2048, 1, 1)
	first, ver, err := CachedBootBlobs(context.Background(), dir, m, kernel, initrd, "console=hvc0")
	if err != nil {
		t.Fatal(err)
	}
	if ver[0] != 10 {
		t.Fatalf("version %v, want 10.x", ver)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "fwcfg", "*.json"))
	if len(entries) != 1 {
		t.Fatalf("%d cache entries, want 1", len(entries))
	}
	st, err := os.Stat(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 64<<10 {
		t.Errorf("cache entry of %d bytes: it should hold digests, not the kernel", st.Size())
	}
	orig, err := os.ReadFile(entries[0])
	if err != nil {
		t.Fatal(err)
	}
	versionOnly := filepath.Join(t.TempDir(), "qemu")
	script := "#!/bin/sh\n[ \"$*\" = --version ] && exec " + q + " --version\nexit 1\n"
	if err := os.WriteFile(versionOnly, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	same := func(b *FwCfgBoot) bool {
		return bytes.Equal(b.FirmwareKernel(10), first.FirmwareKernel(10)) && bytes.Equal(b.FirmwareKernel(7), first.FirmwareKernel(7)) &&
			bytes.Equal(b.Initrd, first.Initrd) && b.Cmdline == first.Cmdline && b.InitrdAddr == first.InitrdAddr
	}
	foreign := func() []byte {
		var c cachedBoot
		if err := json.Unmarshal(orig, &c); err != nil {
			t.Fatal(err)
		}
		c.Setup = append([]byte{}, c.Setup...)
		c.Setup[0x100] ^= 0xff // outside the header QEMU patches
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}()
	for _, tt := range []struct {
		name  string
		entry []byte
	}{{"intact", orig}, {"damaged", []byte("{")}, {"foreign setup", foreign}} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(entries[0], tt.entry, 0o644); err != nil {
				t.Fatal(err)
			}
			// QEMU is not asked for an intact entry: a QEMU that only
			// tells its version (the key has no path) proves it.
			mm := m
			if tt.name == "intact" {
				mm.Binary = versionOnly
			}
			again, _, err := CachedBootBlobs(context.Background(), dir, mm, kernel, initrd, "console=hvc0")
			if err != nil {
				t.Fatal(err)
			}
			if !same(again) {
				t.Fatal("cached boot items differ from the dump")
			}
			if b, _ := os.ReadFile(entries[0]); !bytes.Equal(b, orig) {
				t.Error("cache entry was not rewritten to the dump")
			}
		})
	}
}

// TestDumpBootBlobsRefusals checks that QEMU's refusal and a wrapper that
// hands over something else are reported, not measured.
func TestDumpBootBlobsRefusals(t *testing.T) {
	q := testQEMU(t, 7)
	kernel := debianKernel(t)
	if _, err := DumpBootBlobs(context.Background(), KataTDXMachine(q, 2048, 1, 1), kernel[:4096], nil, ""); err == nil {
		t.Error("a truncated kernel was handed over")
	}
	if _, err := DumpBootBlobs(context.Background(), KataTDXMachine("", 2048, 1, 1), kernel, nil, ""); err == nil || !strings.Contains(err.Error(), "no QEMU") {
		t.Errorf("no binary: %v", err)
	}
	b, err := DumpBootBlobs(context.Background(), KataTDXMachine(q, 2048, 1, 1), kernel, nil, "x")
	if err != nil {
		t.Fatal(err)
	}
	other := append([]byte{}, kernel...)
	other[len(other)-1] ^= 1
	if err := b.check(other, nil, "x"); err == nil || !strings.Contains(err.Error(), "kernel item differs") {
		t.Errorf("another kernel: %v", err)
	}
	if err := b.check(kernel, nil, "y"); err == nil || !strings.Contains(err.Error(), "command line") {
		t.Errorf("another command line: %v", err)
	}
	if err := b.check(kernel, []byte("i"), "x"); err == nil || !strings.Contains(err.Error(), "initrd") {
		t.Errorf("another initrd: %v", err)
	}
}

// TestACPIBlobsAsFirmwareReads boots Debian 12's OVMF (TCG, no TDX) with
// the Debian kernel until the kernel prints its banner, long after the
// firmware's DXE phase read and installed the ACPI tables, and reads the
// blobs QEMU built for that read: they must be the ones DumpACPIBlobs
// reads from a stopped QEMU after setting up the chipset as the firmware
// does (programChipset), for the same machine. The tables of a chipset
// at reset (no MCFG, no ACPI PM block) are not what firmware measures.
func TestACPIBlobsAsFirmwareReads(t *testing.T) {
	kernel := os.Getenv("BERTH_TDX_KERNEL")
	debianKernel(t)
	q := testQEMU(t, 7)
	m := KataTDXMachine(q, 2048, 1, 1)
	serial := filepath.Join(t.TempDir(), "serial.log")
	m.Extra = []string{"-bios", "testdata/OVMF.debian12u2.fd", "-kernel", kernel, "-append", "console=ttyS0 panic=0", "-serial", "file:" + serial}
	want, err := DumpACPIBlobs(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	var running []string
	for _, a := range m.Args() {
		if a != "-S" {
			running = append(running, a)
		}
	}
	var got *ACPIBlobs
	err = runQtest(context.Background(), m, running, nil, 0, func(q *qtest) error {
		deadline := time.Now().Add(3 * time.Minute)
		for {
			if b, _ := os.ReadFile(serial); bytes.Contains(b, []byte("Linux version")) {
				break
			}
			if time.Now().After(deadline) {
				b, _ := os.ReadFile(serial)
				return fmt.Errorf("the kernel printed no banner within 3 minutes; serial output: %q", b)
			}
			time.Sleep(200 * time.Millisecond)
		}
		var err error
		got, err = q.readACPI()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Loader, want.Loader) || len(got.Files) != len(want.Files) {
		t.Fatal("the firmware read another table loader or allocation list")
	}
	for i := range got.Files {
		if got.Files[i].Name != want.Files[i].Name || !bytes.Equal(got.Files[i].Data, want.Files[i].Data) {
			t.Errorf("%s: the firmware read other bytes than DumpACPIBlobs", got.Files[i].Name)
		}
	}
}
