package refvalues

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/goldenfile"
)

// debianKernel returns the Debian linux-image-6.1.0-57-cloud-amd64 vmlinuz
// (a signed EFI-stub bzImage) that testdata/fetch-kernel.sh re-obtains by
// pinned digest; .ci/tools.sh exports its path as BERTH_TDX_KERNEL. It is
// 14 MB, too large to commit.
func debianKernel(t *testing.T) []byte {
	t.Helper()
	testkit.NeedsTools(t, "the Debian kernel (BERTH_TDX_KERNEL)")
	p := os.Getenv("BERTH_TDX_KERNEL")
	if p == "" {
		t.Fatal("BERTH_TDX_KERNEL is not set: run `. .ci/tools.env` (tools.sh runs internal/node/refvalues/testdata/fetch-kernel.sh) or fetch-kernel.sh DIR and point BERTH_TDX_KERNEL at DIR/vmlinuz-6.1.0-57-cloud-amd64")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256hex(b); got != debianKernelSHA256 {
		t.Fatalf("%s: SHA-256 %s, want %s (the kernel fetch-kernel.sh pins)", p, got, debianKernelSHA256)
	}
	return b
}

const debianKernelSHA256 = "1a7ac0c40b10b98353b6f85fa9a0d4f2703287979567e19629d35ad2d777d124"

func readACPIDir(t *testing.T, dir string) *ACPIBlobs {
	t.Helper()
	b := &ACPIBlobs{Loader: readTestdata(t, filepath.Join(dir, "table-loader"))}
	names, err := loaderAllocations(b.Loader)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b.Files = append(b.Files, FwCfgFile{Name: n, Data: readTestdata(t, filepath.Join(dir, filepath.Base(n)))})
	}
	return b
}

// withOracleHOBLayout returns the firmware with the TempMem and TD_HOB
// sections the oracle's fixed TD HOB describes (its td_hob.c: TempMem at
// 0x800000 and 0x80b000, TD_HOB at 0x809000, TempMem at 0x811000, for a
// 4 GiB guest), so that RTMR0 can be compared in full. The oracle does not
// derive the HOB from the firmware.
func withOracleHOBLayout(td *TDVF) *TDVF {
	out := &TDVF{Image: td.Image}
	for _, s := range td.Sections {
		if s.Type == TDVFSectionBFV || s.Type == TDVFSectionCFV {
			out.Sections = append(out.Sections, s)
		}
	}
	for _, r := range []struct {
		gpa, size uint64
		typ       TDVFSectionType
	}{{0x800000, 0x6000, TDVFSectionTempMem}, {0x809000, 0x2000, TDVFSectionTDHOB}, {0x80b000, 0x2000, TDVFSectionTempMem}, {0x811000, 0xf000, TDVFSectionTempMem}} {
		out.Sections = append(out.Sections, TDVFSection{GPA: r.gpa, MemSize: r.size, Type: r.typ})
	}
	return out
}

// TestRTMRVectors checks RTMR0-2 against values produced by Fraunhofer
// AISEC's calculate-tdx-mrs (testdata/rtmr-oracle.sh, SOURCES.md) on the
// Debian 12 OVMF.fd builds, QEMU 7.2's ACPI blobs for 2048 and 4096 MiB,
// and the Debian 6.1 cloud kernel, for QEMU 7 (patched setup header, with
// and without initrd) and QEMU 10 (unpatched): from the model, and (kinds
// *-fwcfg) from what the real QEMU 7.2 and 10.0 hand the firmware.
func TestRTMRVectors(t *testing.T) {
	rows := readPSV(t, "vectors-rtmr.psv", 9)
	kernel := debianKernel(t)
	for _, row := range rows {
		t.Run(row[0]+"-"+row[1], func(t *testing.T) {
			req := RTMRRequest{Kernel: kernel, Cmdline: row[7]}
			if row[7] == "-" {
				req.Cmdline = ""
			}
			if row[4] != "-" {
				req.QEMUMajor, _ = strconv.Atoi(row[4])
			}
			req.MemoryMiB, _ = strconv.ParseUint(row[5], 10, 64)
			if row[6] != "-" {
				req.Initrd = readTestdata(t, row[6])
			}
			want := row[8]
			switch row[1] {
			case "rtmr0-oraclehob":
				td, err := ParseTDVF(readTestdata(t, row[2]))
				if err != nil {
					t.Fatal(err)
				}
				req.Firmware, req.ACPI = withOracleHOBLayout(td), readACPIDir(t, row[3])
				evs, err := rtmr0Events(req)
				if err != nil {
					t.Fatal(err)
				}
				if got := replay(evs)[0].String(); got != want {
					t.Errorf("RTMR0 = %s, want %s", got, want)
				}
			case "rtmr1", "rtmr2", "cmdline-event":
				checkBootVector(t, row[1], req, want)
			case "rtmr1-fwcfg", "rtmr2-fwcfg", "cmdline-event-fwcfg":
				fwcfgVector(t, row, req)
			default:
				t.Fatalf("unknown vector kind %q", row[1])
			}
		})
	}
}

// checkBootVector compares RTMR1 ("rtmr1"), RTMR2 ("rtmr2") or the
// command-line event ("cmdline-event", with the initrd event after it)
// computed for req with want.
func checkBootVector(t *testing.T, kind string, req RTMRRequest, want string) {
	t.Helper()
	initrd := req.Initrd
	if req.FwCfg != nil {
		initrd = req.FwCfg.Initrd
	}
	switch kind {
	case "rtmr1":
		evs, err := rtmr1Events(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := replay(evs)[1].String(); got != want {
			t.Errorf("RTMR1 = %s, want %s", got, want)
		}
	case "rtmr2":
		evs, _ := rtmr2Events(req)
		if got := replay(evs)[2].String(); got != want {
			t.Errorf("RTMR2 = %s, want %s", got, want)
		}
	case "cmdline-event":
		evs, _ := rtmr2Events(req)
		if len(evs) != 2 {
			t.Fatalf("%d RTMR2 events with an initrd, want 2 (command line, initrd)", len(evs))
		}
		if got := evs[0].Digest.String(); got != want {
			t.Errorf("command line event = %s, want %s", got, want)
		}
		if evs[1].Digest != sha384(initrd) {
			t.Errorf("initrd event = %s, want SHA-384 of the initrd", evs[1].Digest)
		}
	default:
		t.Fatalf("unknown vector kind %q", kind)
	}
}

// TestRTMRGolden pins the full RTMR0-2 berth computes for the Kata sizes on
// both Debian firmware builds. RTMR1 and RTMR2 are the oracle's (above);
// RTMR0 differs from the oracle's only in the TD HOB, which berth derives
// from the firmware's sections and the memory size (checked against the
// oracle's layout above).
func TestRTMRGolden(t *testing.T) {
	kernel := debianKernel(t)
	initrd := readTestdata(t, "initrd-synthetic.bin")
	var out bytes.Buffer
	for _, fw := range []string{"OVMF.debian12u1.fd", "OVMF.debian12u2.fd"} {
		td, err := ParseTDVF(readTestdata(t, fw))
		if err != nil {
			t.Fatal(err)
		}
		for _, mem := range []uint64{2048, 4096} {
			for _, q := range []int{7, 10} {
				for _, withInitrd := range []bool{false, true} {
					req := RTMRRequest{Firmware: td, MemoryMiB: mem, ACPI: readACPIDir(t, "acpi-qemu7.2-"+strconv.FormatUint(mem, 10)), Kernel: kernel, Cmdline: "console=hvc0", QEMUMajor: q}
					if withInitrd {
						req.Initrd = initrd
					}
					r, err := ComputeRTMRs(req)
					if err != nil {
						t.Fatal(err)
					}
					out.WriteString(strings.Join([]string{fw, strconv.FormatUint(mem, 10), strconv.Itoa(q), strconv.FormatBool(withInitrd), r.RTMR[0].String(), r.RTMR[1].String(), r.RTMR[2].String()}, "|") + "\n")
				}
			}
		}
	}
	goldenfile.Assert(t, filepath.Join("testdata", "golden", "rtmr.psv"), out.Bytes())
}

func TestTDHOB(t *testing.T) {
	td, err := ParseTDVF(readTestdata(t, "OVMF.debian12u2.fd"))
	if err != nil {
		t.Fatal(err)
	}
	type rd struct {
		typ         uint32
		start, size uint64
	}
	low := []rd{{7, 0, 0x800000}, {0, 0x800000, 0x6000}, {7, 0x806000, 0x3000}, {0, 0x809000, 0x2000}, {0, 0x80b000, 0x2000}, {7, 0x80d000, 0x3000}, {0, 0x810000, 0x10000}}
	tests := []struct {
		mem  uint64
		want []rd
	}{
		{2048, append(append([]rd{}, low...), rd{7, 0x820000, 0x80000000 - 0x820000})},
		{2816, append(append([]rd{}, low...), rd{7, 0x820000, 0x80000000 - 0x820000}, rd{7, 1 << 32, 768 << 20})},
		{2815, append(append([]rd{}, low...), rd{7, 0x820000, 2815<<20 - 0x820000})},
		{4096, append(append([]rd{}, low...), rd{7, 0x820000, 0x80000000 - 0x820000}, rd{7, 1 << 32, 2 << 30})},
	}
	for _, tt := range tests {
		t.Run(strconv.FormatUint(tt.mem, 10), func(t *testing.T) {
			hob, err := TDHOB(td, tt.mem)
			if err != nil {
				t.Fatal(err)
			}
			if len(hob) != hobHandoffSize+hobResourceSize*len(tt.want) {
				t.Fatalf("HOB of %d bytes, want %d descriptors", len(hob), len(tt.want))
			}
			if end := binary.LittleEndian.Uint64(hob[48:]); end != 0x809000+uint64(len(hob))+8 {
				t.Errorf("EfiEndOfHobList %#x, want the TD_HOB base plus the list and its end HOB", end)
			}
			for i, w := range tt.want {
				d := hob[hobHandoffSize+hobResourceSize*i:]
				got := rd{binary.LittleEndian.Uint32(d[24:]), binary.LittleEndian.Uint64(d[32:]), binary.LittleEndian.Uint64(d[40:])}
				if got != w {
					t.Errorf("descriptor %d = %+v, want %+v", i, got, w)
				}
			}
		})
	}
}

func TestRTMRErrors(t *testing.T) {
	td, err := ParseTDVF(readTestdata(t, "OVMF.debian12u2.fd"))
	if err != nil {
		t.Fatal(err)
	}
	acpi := readACPIDir(t, "acpi-qemu7.2-2048")
	pe := testPE(t, 64)
	tests := []struct {
		name string
		mod  func(r *RTMRRequest)
		want string
	}{
		{"non-PE kernel", func(r *RTMRRequest) { r.Kernel = readTestdata(t, "kernel-synthetic.bin"); r.QEMUMajor = 10 }, "not a PE/COFF image"},
		{"non-bzImage kernel before QEMU 10", func(r *RTMRRequest) { r.Kernel = readTestdata(t, "kernel-synthetic.bin"); r.QEMUMajor = 7 }, "no Linux x86 setup header"},
		{"truncated PE", func(r *RTMRRequest) { r.Kernel = pe[:len(pe)-100] }, "runs past the end"},
		{"memory under the firmware minimum", func(r *RTMRRequest) { r.MemoryMiB = 8 }, "under the firmware's minimum"},
		{"no memory", func(r *RTMRRequest) { r.MemoryMiB = 0 }, "guest memory 0 MiB"},
		{"Secure Boot firmware", func(r *RTMRRequest) {
			ms, err := ParseTDVF(readTestdata(t, "OVMF.inteltdx.ms.fd"))
			if err != nil {
				t.Fatal(err)
			}
			r.Firmware = ms
		}, "enforces Secure Boot"},
		{"no ACPI", func(r *RTMRRequest) { r.ACPI = nil }, "no ACPI tables"},
		{"loader without ALLOCATE", func(r *RTMRRequest) { r.ACPI = &ACPIBlobs{Loader: make([]byte, 128)} }, "no ALLOCATE"},
		{"no kernel", func(r *RTMRRequest) { r.Kernel = nil }, "no kernel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := RTMRRequest{Firmware: td, MemoryMiB: 2048, ACPI: acpi, Kernel: pe, QEMUMajor: 10}
			tt.mod(&req)
			r, err := ComputeRTMRs(req)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ComputeRTMRs = %v, %v; want an error containing %q", r, err, tt.want)
			}
		})
	}
	if _, err := ParseTDVF(readTestdata(t, "OVMF.debian12u2.fd")[:1<<20+100]); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("truncated firmware: %v, want an error saying truncated", err)
	}
}

// testPE builds a minimal PE32+ image with one section of n bytes and a
// certificate table of 16 bytes after it.
func testPE(t *testing.T, n int) []byte {
	t.Helper()
	const peOff, optSize = 0x80, 240
	hdrs := 0x200
	img := make([]byte, hdrs+n+16)
	copy(img, "MZ")
	binary.LittleEndian.PutUint32(img[0x3c:], peOff)
	copy(img[peOff:], "PE\x00\x00")
	coff := peOff + 4
	binary.LittleEndian.PutUint16(img[coff:], 0x8664)
	binary.LittleEndian.PutUint16(img[coff+2:], 1)
	binary.LittleEndian.PutUint16(img[coff+16:], optSize)
	opt := coff + 20
	binary.LittleEndian.PutUint16(img[opt:], 0x20b)
	binary.LittleEndian.PutUint32(img[opt+60:], uint32(hdrs))
	binary.LittleEndian.PutUint32(img[opt+64:], 0xdeadbeef) // CheckSum, not hashed
	binary.LittleEndian.PutUint32(img[opt+108:], 16)
	binary.LittleEndian.PutUint32(img[opt+112+4*8:], uint32(hdrs+n))
	binary.LittleEndian.PutUint32(img[opt+112+4*8+4:], 16)
	sec := opt + optSize
	copy(img[sec:], ".text")
	binary.LittleEndian.PutUint32(img[sec+16:], uint32(n))
	binary.LittleEndian.PutUint32(img[sec+20:], uint32(hdrs))
	for i := range n {
		img[hdrs+i] = byte(i)
	}
	return img
}

// TestAuthenticodeExclusions checks the fields Authenticode leaves out:
// changing the CheckSum, the Certificate Table entry or the certificate
// bytes keeps the digest; changing a section byte does not.
func TestAuthenticodeExclusions(t *testing.T) {
	base := testPE(t, 64)
	digest := func(b []byte) Digest384 {
		p, err := ParsePE(b)
		if err != nil {
			t.Fatal(err)
		}
		return p.Authenticode()
	}
	want := digest(base)
	opt := 0x80 + 4 + 20
	tests := []struct {
		name string
		off  int
		same bool
	}{
		{"checksum", opt + 64, true},
		{"certificate table address", opt + 112 + 32, true},
		{"certificate bytes", len(base) - 1, true},
		{"section byte", 0x200 + 5, false},
		{"header byte", 0x10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := append([]byte{}, base...)
			b[tt.off] ^= 0x01
			if got := digest(b) == want; got != tt.same {
				t.Errorf("digest unchanged = %v, want %v", got, tt.same)
			}
		})
	}
}

// TestDumpACPIBlobs runs the real QEMU, stopped, with the qtest server and
// compares the blobs with those committed for QEMU 7.2 (Debian 12).
func TestDumpACPIBlobs(t *testing.T) {
	testkit.NeedsTools(t, "QEMU 7.2 (Debian 12's)")
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal("qemu-system-x86_64 not found: .ci/tools.sh installs qemu-system-x86")
	}
	ver, err := QEMUVersion(context.Background(), qemu)
	if err != nil {
		t.Fatal(err)
	}
	if ver[0] != 7 || ver[1] != 2 {
		t.Fatalf("QEMU %d.%d.%d: the committed blobs are QEMU 7.2's (Debian 12); dump new ones for this version", ver[0], ver[1], ver[2])
	}
	for _, mem := range []uint64{2048, 4096} {
		t.Run(strconv.FormatUint(mem, 10), func(t *testing.T) {
			got, err := DumpACPIBlobs(context.Background(), KataTDXMachine(qemu, mem, 1, 1))
			if err != nil {
				t.Fatal(err)
			}
			want := readACPIDir(t, "acpi-qemu7.2-"+strconv.FormatUint(mem, 10))
			if !bytes.Equal(got.Loader, want.Loader) || len(got.Files) != len(want.Files) {
				t.Fatalf("table loader or allocation list differs from testdata")
			}
			for i := range got.Files {
				if got.Files[i].Name != want.Files[i].Name || !bytes.Equal(got.Files[i].Data, want.Files[i].Data) {
					t.Errorf("%s differs from testdata", got.Files[i].Name)
				}
			}
		})
	}
}

// TestDumpACPIBlobsGuestTiming gives the guest half a second before the
// dump: a vCPU left running would have executed SeaBIOS by then, which
// programs PCIEXBAR and PMBASE and so changes the tables QEMU builds (an
// MCFG table, the DRAC device, the GPE0 block at 0x620). The dump must
// still be the committed one: it may not depend on how fast berth talks
// to QEMU, which under CPU load it did.
func TestDumpACPIBlobsGuestTiming(t *testing.T) {
	testkit.NeedsTools(t, "QEMU 7.2 (Debian 12's)")
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal("qemu-system-x86_64 not found: .ci/tools.sh installs qemu-system-x86")
	}
	want := readACPIDir(t, "acpi-qemu7.2-2048")
	for _, settle := range []time.Duration{0, 500 * time.Millisecond} {
		t.Run(settle.String(), func(t *testing.T) {
			got, err := dumpACPIBlobs(context.Background(), KataTDXMachine(qemu, 2048, 1, 1), settle)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Loader, want.Loader) || len(got.Files) != len(want.Files) {
				t.Fatalf("table loader or allocation list differs from testdata")
			}
			for i := range got.Files {
				if !bytes.Equal(got.Files[i].Data, want.Files[i].Data) {
					t.Errorf("%s differs from testdata", got.Files[i].Name)
				}
			}
		})
	}
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestCachedACPIBlobs checks that a cache entry is written once, read back
// equal, and that a damaged entry is replaced rather than trusted.
func TestCachedACPIBlobs(t *testing.T) {
	testkit.NeedsTools(t, "QEMU (Debian's qemu-system-x86)")
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatal("qemu-system-x86_64 not found: .ci/tools.sh installs qemu-system-x86")
	}
	dir := t.TempDir()
	m := KataTDXMachine(qemu, 2048, 1, 1)
	first, _, err := CachedACPIBlobs(context.Background(), dir, m)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "acpi", "*.json"))
	if len(entries) != 1 {
		t.Fatalf("%d cache entries, want 1", len(entries))
	}
	for _, damage := range []bool{false, true} {
		if damage {
			if err := os.WriteFile(entries[0], []byte("{"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		again, _, err := CachedACPIBlobs(context.Background(), dir, m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Loader, first.Loader) || len(again.Files) != len(first.Files) || !bytes.Equal(again.Files[1].Data, first.Files[1].Data) {
			t.Fatalf("cached blobs (damaged entry: %v) differ from the dump", damage)
		}
	}
	if b, _ := os.ReadFile(entries[0]); string(b) == "{" {
		t.Error("damaged cache entry was not replaced")
	}
}
