package refvalues

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
)

// fuzzImage turns fuzz input into something the image checks accept: the
// input is the tail of the image (where the footer table and metadata
// live), padded at the front to whole pages, so the fuzzer spends its time
// in the metadata parsers rather than in the size check.
func fuzzImage(b []byte) []byte {
	if len(b) > 4*pageSize {
		b = b[len(b)-4*pageSize:]
	}
	pad := (pageSize - len(b)%pageSize) % pageSize
	return append(make([]byte, pad), b...)
}

// The seeds live in testdata/fuzz/<target>/: the real tail of each
// firmware (footer table and metadata) plus malformed variants.
func FuzzOVMFMetadata(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		img := fuzzImage(b)
		o, err := ParseOVMF(img)
		if err != nil {
			return
		}
		var total uint64
		for _, s := range o.Sections {
			total += s.Size
		}
		if total > 16<<20 {
			return // valid but slow to measure; the parser is what is fuzzed
		}
		h := SEVHashes{}
		for _, hp := range []*SEVHashes{nil, &h} {
			p, err := MeasureSNP(o, hp)
			if err != nil {
				continue
			}
			if _, err := p.LaunchDigests(Milan.VCPUType(), 1, VMMQEMU, 2); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func FuzzTDVFMetadata(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		img := fuzzImage(b)
		td, err := ParseTDVF(img)
		if err != nil {
			return
		}
		var total uint64
		for _, s := range td.Sections {
			total += s.MemSize
		}
		if total > 16<<20 {
			return
		}
		a, b2 := MRTD(td, SinglePass), MRTD(td, TwoPass)
		extends := false
		for _, s := range td.Sections {
			extends = extends || s.Attributes&TDVFAttrMRExtend != 0 && s.Attributes&TDVFAttrPageAug == 0
		}
		if !extends && !bytes.Equal(a[:], b2[:]) {
			t.Fatal("page order changed MRTD although nothing is extended")
		}
	})
}

// FuzzParsePE feeds PE/COFF images (seeds: a minimal PE32+ with a
// certificate table, the Debian kernel's headers, a non-PE file, a
// bzImage whose setup area runs past its end, an all-zero file) to the
// setup-header bounds check and the Authenticode parser: it must reject or hash, never panic or read out of
// bounds.
func FuzzParsePE(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkSetup(b, int64(len(b)))
		p, err := ParsePE(b)
		if err != nil {
			return
		}
		p.Authenticode()
		if patched, err := patchSetupHeader(b, qemuSetupPatch{}); err == nil {
			if len(patched) != len(b) {
				t.Fatalf("patched kernel is %d bytes, want %d", len(patched), len(b))
			}
		}
	})
}

// FuzzTableLoader feeds table-loader scripts (seeds: QEMU 7.2's, a short
// and an empty one) to the parser that orders RTMR0's ACPI events; cached
// blobs pass through it too.
func FuzzTableLoader(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := loaderAllocations(b)
		if err != nil {
			return
		}
		if len(names) == 0 || len(names) > len(b)/128 {
			t.Fatalf("%d allocations from %d bytes", len(names), len(b))
		}
	})
}

// fuzzBootKernel is the kernel FuzzFwCfgBootCache rebuilds entries for: a
// 16 KiB file with a setup header claiming 4 setup sectors.
func fuzzBootKernel() []byte {
	k := make([]byte, 16<<10)
	for i := range k {
		k[i] = byte(i * 7)
	}
	copy(k[setupHdrS:], "HdrS")
	k[setupSects] = 4
	return k
}

// FuzzFwCfgBootCache feeds cache entries (testdata/fuzz: an entry as
// berth writes it for fuzzBootKernel, and damaged ones) to the rebuild: it
// never panics, and an entry it accepts yields the kernel given, patched
// in the setup header only, and the initrd given.
func FuzzFwCfgBootCache(f *testing.F) {
	kernel := fuzzBootKernel()
	initrd := []byte("initrd")
	f.Fuzz(func(t *testing.T, b []byte) {
		var c cachedBoot
		if json.Unmarshal(b, &c) != nil {
			return
		}
		for _, in := range [][]byte{nil, initrd} {
			boot := c.rebuild(kernel, in)
			if boot == nil {
				continue
			}
			k := boot.FirmwareKernel(7)
			if len(k) != len(kernel) || !bytes.Equal(k[0x280:], kernel[0x280:]) || !bytes.Equal(k[:setupSects], kernel[:setupSects]) {
				t.Fatalf("accepted entry yields another kernel than the one given outside the setup header")
			}
			if !bytes.Equal(boot.Initrd, in) {
				t.Fatalf("accepted entry yields initrd %q for %q", boot.Initrd, in)
			}
			if boot.BootKernel != nil && !bytes.Equal(boot.BootKernel, kernel) {
				t.Fatal("accepted entry yields another etc/boot/kernel than the kernel given")
			}
		}
	})
}

// FuzzParseSNPReport: the seeds are the real reports of
// testdata/snpreports (and malformed variants); a report the parser
// accepts must be explainable against a reference without panicking.
func FuzzParseSNPReport(f *testing.F) {
	ref := &Document{SNP: &SNPValues{GuestPolicy: DefaultGuestPolicy, Sets: []SNPSet{{ProductLine: Genoa, LaunchDigests: []LaunchDigest{{VCPUs: 1}}}}},
		InitData: &InitDataValues{HostData: "00"}}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeSNPReport(b)
		if err != nil {
			return
		}
		if r.Version != 2 && r.Version != 3 && r.Version != 5 {
			t.Fatalf("version %d accepted", r.Version)
		}
		var out bytes.Buffer
		if err := ExplainSNP(r, ref).WriteTable(&out); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzLZMA: the decoder reads compressed volumes out of firmware images
// (ReadFirmwareVersion); the seed is liblzma's stream of edk2version_test.
func FuzzLZMA(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := lzmaDecode(b, 1<<20)
		if err == nil && len(b) >= 13 && uint64(len(out)) != binary.LittleEndian.Uint64(b[5:]) {
			t.Fatalf("%d bytes out, the header says %d", len(out), binary.LittleEndian.Uint64(b[5:]))
		}
	})
}
