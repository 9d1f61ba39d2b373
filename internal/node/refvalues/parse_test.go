package refvalues

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
)

// sevMetadataBase returns the image offset of the "ASEV" header.
func sevMetadataBase(t *testing.T, fw []byte) int {
	t.Helper()
	tb, err := ParseFooterTable(fw)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := tb.Lookup(mustGUID(guidSEVMetadata))
	if !ok {
		t.Fatal("no SEV metadata in test firmware")
	}
	return len(fw) - int(binary.LittleEndian.Uint32(d))
}

func tdvfMetadataBase(t *testing.T, fw []byte) int {
	t.Helper()
	tb, err := ParseFooterTable(fw)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := tb.Lookup(mustGUID(guidTDXMetadata))
	if !ok {
		t.Fatal("no TDX metadata in test firmware")
	}
	return len(fw) - int(binary.LittleEndian.Uint32(d))
}

// replaceGUID overwrites every occurrence of a footer table GUID so that
// the entry is no longer found.
func replaceGUID(fw []byte, guid string) []byte {
	g := mustGUID(guid)
	return bytes.ReplaceAll(fw, g[:], make([]byte, 16))
}

func TestParseOVMFErrors(t *testing.T) {
	good := readTestdata(t, "OVMF.amdsev.fd")
	base := sevMetadataBase(t, good)
	sec := func(i int) int { return base + 16 + 12*i }
	tests := []struct {
		name   string
		mutate func(fw []byte) []byte
		want   string
	}{
		{"empty", func([]byte) []byte { return nil }, "firmware is empty"},
		{"truncated to a partial page", func(fw []byte) []byte { return fw[:len(fw)-100] }, "not a whole number"},
		{"truncated to whole pages", func(fw []byte) []byte { return fw[:len(fw)-pageSize] }, "no OVMF footer table"},
		{"footer length too large", func(fw []byte) []byte {
			binary.LittleEndian.PutUint16(fw[len(fw)-0x32:], 0xffff)
			return fw
		}, "OVMF footer table"},
		{"footer length too small", func(fw []byte) []byte {
			binary.LittleEndian.PutUint16(fw[len(fw)-0x32:], 5)
			return fw
		}, "length 5 out of range"},
		{"footer length off by one", func(fw []byte) []byte {
			l := binary.LittleEndian.Uint16(fw[len(fw)-0x32:])
			binary.LittleEndian.PutUint16(fw[len(fw)-0x32:], l-1)
			return fw
		}, "OVMF footer table"},
		{"no SEV metadata", func(fw []byte) []byte { return replaceGUID(fw, guidSEVMetadata) }, guidSEVMetadata},
		{"no reset block", func(fw []byte) []byte { return replaceGUID(fw, guidSEVESResetBlock) }, guidSEVESResetBlock},
		{"metadata offset outside image", func(fw []byte) []byte {
			tb, _ := ParseFooterTable(fw)
			for _, e := range tb {
				if e.GUID == mustGUID(guidSEVMetadata) {
					binary.LittleEndian.PutUint32(fw[e.Offset:], uint32(len(fw)+1))
				}
			}
			return fw
		}, "outside the"},
		{"bad signature", func(fw []byte) []byte { copy(fw[base:], "XSEV"); return fw }, `expected "ASEV"`},
		{"bad version", func(fw []byte) []byte { fw[base+8] = 2; return fw }, "version 2"},
		{"length mismatch", func(fw []byte) []byte { fw[base+4]++; return fw }, "expected length"},
		{"unknown section type", func(fw []byte) []byte { fw[sec(0)+8] = 0x7; return fw }, "unknown type 0x7"},
		{"unaligned section", func(fw []byte) []byte { fw[sec(0)] = 0x10; return fw }, "aligned"},
		{"overlapping sections", func(fw []byte) []byte {
			binary.LittleEndian.PutUint32(fw[sec(1):], 0x801000)
			return fw
		}, "overlaps"},
		{"section inside the firmware", func(fw []byte) []byte {
			binary.LittleEndian.PutUint32(fw[sec(0):], 0xfffff000)
			return fw
		}, "reaches into the firmware"},
		{"section past 4 GiB", func(fw []byte) []byte {
			binary.LittleEndian.PutUint32(fw[sec(0):], 0xfffff000)
			binary.LittleEndian.PutUint32(fw[sec(0)+4:], 0x2000)
			return fw
		}, "reaches into the firmware"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fw := tt.mutate(bytes.Clone(good))
			_, err := ParseOVMF(fw)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseOVMF error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestParseTDVFErrors(t *testing.T) {
	good := readTestdata(t, "OVMF.inteltdx.ms.fd")
	base := tdvfMetadataBase(t, good)
	sec := func(i int) int { return base + 16 + 32*i }
	tests := []struct {
		name   string
		mutate func(fw []byte) []byte
		want   string
	}{
		{"truncated", func(fw []byte) []byte { return fw[:12345] }, "not a whole number"},
		{"no TDX metadata", func(fw []byte) []byte { return replaceGUID(fw, guidTDXMetadata) }, guidTDXMetadata},
		{"no footer table", func(fw []byte) []byte { return replaceGUID(fw, guidFooterTable) }, guidFooterTable},
		{"bad signature", func(fw []byte) []byte { copy(fw[base:], "TDVX"); return fw }, `expected "TDVF"`},
		{"zero sections", func(fw []byte) []byte {
			binary.LittleEndian.PutUint32(fw[base+12:], 0)
			return fw
		}, "1..64 sections"},
		{"unknown type", func(fw []byte) []byte { fw[sec(0)+24] = 9; return fw }, "unknown type 9"},
		{"unknown attribute", func(fw []byte) []byte { fw[sec(0)+28] = 0x80; return fw }, "unknown attributes"},
		{"raw data past the image", func(fw []byte) []byte {
			binary.LittleEndian.PutUint32(fw[sec(0):], uint32(len(fw)-pageSize))
			return fw
		}, "runs past the end"},
		{"raw data larger than memory", func(fw []byte) []byte {
			binary.LittleEndian.PutUint64(fw[sec(1)+16:], pageSize)
			return fw
		}, "do not fit"},
		{"overlapping sections", func(fw []byte) []byte {
			binary.LittleEndian.PutUint64(fw[sec(3)+8:], 0x810000)
			return fw
		}, "overlaps"},
		{"beyond 52 bits", func(fw []byte) []byte {
			binary.LittleEndian.PutUint64(fw[sec(2)+8:], 1<<60)
			return fw
		}, "52-bit"},
		{"huge build memory", func(fw []byte) []byte {
			binary.LittleEndian.PutUint64(fw[sec(2)+8:], 1<<40)
			binary.LittleEndian.PutUint64(fw[sec(2)+16:], 1<<36)
			return fw
		}, "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTDVF(tt.mutate(bytes.Clone(good)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseTDVF error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLaunchDigestsErrors(t *testing.T) {
	o, err := ParseOVMF(readTestdata(t, "OVMF.amdsev.fd"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := MeasureSNP(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	genoa := Genoa.VCPUType()
	for _, n := range []int{0, -1, MaxVCPUs + 1} {
		if _, err := p.LaunchDigests(genoa, 1, VMMQEMU, n); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("LaunchDigests(%d vCPUs) error = %v, want out of range", n, err)
		}
	}
	if _, err := p.LaunchDigests(VCPUType{Name: "x"}, 1, VMMQEMU, 1); err == nil {
		t.Error("LaunchDigests with a zero signature succeeded")
	}
	// Incremental: the digest for n vCPUs must not depend on how many
	// more were computed.
	all, err := p.LaunchDigests(genoa, 1, VMMQEMU, 8)
	if err != nil {
		t.Fatal(err)
	}
	three, _ := p.LaunchDigests(genoa, 1, VMMQEMU, 3)
	if all[2] != three[2] {
		t.Error("digest for 3 vCPUs differs when computed as part of 1..8")
	}
}

func TestParseVCPUType(t *testing.T) {
	tests := []struct {
		in      string
		sig     uint32
		wantErr string
	}{
		{"EPYC-Milan", 0xa00f11, ""},
		{"epyc-genoa", 0xa10f10, ""},
		{"EPYC-Turin", 0xb00f00, ""},
		{"0xa10f11", 0xa10f11, ""},
		{"EPYC-Rome", 0, "unknown vCPU type"},
		{"Skylake", 0, "unknown vCPU type"},
		{"0x0", 0, "unknown vCPU type"},
		{"", 0, "unknown vCPU type"},
	}
	for _, tt := range tests {
		got, err := ParseVCPUType(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseVCPUType(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Signature != tt.sig {
			t.Errorf("ParseVCPUType(%q) = %#x, %v; want %#x", tt.in, got.Signature, err, tt.sig)
		}
	}
}

func TestParseVCPURange(t *testing.T) {
	tests := []struct {
		in   string
		want VCPURange
		ok   bool
	}{
		{"1", VCPURange{1, 1}, true},
		{"4", VCPURange{4, 4}, true},
		{"1-8", VCPURange{1, 8}, true},
		{"512", VCPURange{512, 512}, true},
		{"0", VCPURange{}, false},
		{"513", VCPURange{}, false},
		{"1-513", VCPURange{}, false},
		{"8-1", VCPURange{}, false},
		{"x", VCPURange{}, false},
		{"1-", VCPURange{}, false},
	}
	for _, tt := range tests {
		got, err := ParseVCPURange(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseVCPURange(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestGUIDRoundTrip(t *testing.T) {
	for _, s := range []string{guidFooterTable, guidSEVMetadata, guidTDXMetadata, guidHashKernel} {
		g, err := ParseGUID(s)
		if err != nil || g.String() != s {
			t.Errorf("ParseGUID(%q) = %s, %v", s, g, err)
		}
	}
	for _, bad := range []string{"", "dc886566-984a-4798-a75e-5585a7bf67c", "zc886566-984a-4798-a75e-5585a7bf67cc"} {
		if _, err := ParseGUID(bad); err == nil {
			t.Errorf("ParseGUID(%q) succeeded", bad)
		}
	}
}

// TestFuzzSeedsParse keeps the seed corpora useful: the real tail of each
// firmware must parse, so the fuzzer starts deep in the parsers.
func TestFuzzSeedsParse(t *testing.T) {
	amd := readTestdata(t, "OVMF.amdsev.fd")
	if _, err := ParseOVMF(fuzzImage(amd[len(amd)-pageSize:])); err != nil {
		t.Errorf("OVMF seed: %v", err)
	}
	// The real TDVF tail points at raw data far outside a fuzz-sized image;
	// the small-image seed has its sections moved into 16 KiB.
	b := readTestdata(t, "fuzz/FuzzTDVFMetadata/small-image")
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		t.Fatalf("small-image seed: not in Go's corpus format")
	}
	raw, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("small-image seed: %v", err)
	}
	td, err := ParseTDVF(fuzzImage([]byte(raw)))
	if err != nil {
		t.Fatalf("TDVF small-image seed: %v", err)
	}
	if MRTD(td, SinglePass) == MRTD(td, TwoPass) {
		t.Error("TDVF small-image seed: page order does not matter, the seed does not reach the extend path")
	}
}
