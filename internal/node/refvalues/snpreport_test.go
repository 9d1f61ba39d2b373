package refvalues

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

func readSNPReport(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/snpreports/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseSNPReportSamples reads the real reports; the expected values
// come from an independent decoder (testdata/snpreports/SOURCES.md).
func TestParseSNPReportSamples(t *testing.T) {
	for _, tc := range []struct {
		file        string
		version     uint32
		policy      uint64
		vmpl        uint32
		key         string
		line        ProductLine
		measurement string
	}{
		{"go-sev-guest-attestation.bin", 2, 0xb0000, 0, "VCEK", "", "b07af9620f3b839b47996422ddec6058338951d984e312115131ea82705eaf5b6bdf8a9ece31a5a608eb0cf2e4872b01"},
		{"trustee-test-report.bin", 2, 0x3001f, 0, "VCEK", "", "a1f3930413247bb38cfc171579ea3c12d5fe4901f0c792f63fd75d98f1ef827c23500644e0e692e6be917f9050d3d38c"},
		{"trustee-test-vlek-report.bin", 3, 0x30000, 1, "VLEK", Milan, "8922ebbdd00ec2c541f36a6e7a82a8773a7accb451ed67bc94e740dbe92c93c4e8c9af857f5ceeb5a493df2a570d7bf0"},
		{"trustee-az-genoa-report.bin", 3, 0x3001f, 0, "VCEK", Genoa, "f57dc09a507c6ecd82369bffb600f0003792f4d99bc26e985ec0c266fc34faf3706faf814c9e61065768a6ff917c89ae"},
		{"virtee-report_milan.hex", 2, 0x30000, 0, "VCEK", "", "7a1e5c266c0108dbc9bb94fa926951320940915d0aafb42464bd88b579ea158d3e1a0dc39b2c60bd95b9c480cd81841f"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			r, err := DecodeSNPReport(readSNPReport(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Version != tc.version || uint64(r.Policy) != tc.policy || r.VMPL != tc.vmpl || r.SigningKey != tc.key ||
				r.CPUID.ProductLine() != tc.line || r.Measurement.String() != tc.measurement {
				t.Errorf("got version %d policy %#x vmpl %d key %s line %q measurement %s", r.Version, uint64(r.Policy), r.VMPL, r.SigningKey, r.CPUID.ProductLine(), r.Measurement)
			}
			if (r.CPUID != nil) != (tc.version >= 3) || r.LaunchMitVector != nil {
				t.Errorf("version %d: cpuid %v, mitigation vector %v", r.Version, r.CPUID, r.LaunchMitVector)
			}
			if r.HostData != strings.Repeat("0", 64) {
				t.Errorf("HOST_DATA %s, the samples have none", r.HostData)
			}
		})
	}
}

// v5Report is the Genoa sample with VERSION 5 and both mitigation vectors
// set: the layout is the specification's, no real v5 report was found.
func v5Report(t *testing.T) []byte {
	b := bytes.Clone(readSNPReport(t, "trustee-az-genoa-report.bin"))
	binary.LittleEndian.PutUint32(b, 5)
	binary.LittleEndian.PutUint64(b[0x1f8:], 0x3)
	binary.LittleEndian.PutUint64(b[0x200:], 0x7)
	return b
}

func TestParseSNPReportV5(t *testing.T) {
	r, err := ParseSNPReport(v5Report(t))
	if err != nil {
		t.Fatal(err)
	}
	if r.LaunchMitVector == nil || *r.LaunchMitVector != 3 || *r.CurrentMitVector != 7 || r.CPUID.ProductLine() != Genoa {
		t.Errorf("v5 fields: %+v", r)
	}
}

// TestParseSNPReportRefused: every malformed report names the offset and
// field.
func TestParseSNPReportRefused(t *testing.T) {
	good := readSNPReport(t, "trustee-az-genoa-report.bin")
	edit := func(f func(b []byte)) []byte { b := bytes.Clone(good); f(b); return b }
	for _, tc := range []struct {
		name   string
		in     []byte
		offset int
		field  string
	}{
		{"short", good[:1183], 0, "length"},
		{"long", append(bytes.Clone(good), 0), 0, "length"},
		{"version 4", edit(func(b []byte) { b[0] = 4 }), 0, "VERSION"},
		{"version 1 (SEV)", edit(func(b []byte) { b[0] = 1 }), 0, "VERSION"},
		{"policy bit 17", edit(func(b []byte) { b[0xa] &^= 2 }), 0x8, "POLICY"},
		{"vmpl", edit(func(b []byte) { b[0x30] = 4 }), 0x30, "VMPL"},
		{"signature algorithm", edit(func(b []byte) { b[0x34] = 2 }), 0x34, "SIGNATURE_ALGO"},
		{"signing key", edit(func(b []byte) { b[0x48] = 3 << 2 }), 0x48, "SIGNING_KEY"},
		{"key info reserved", edit(func(b []byte) { b[0x49] = 1 }), 0x48, "key information"},
		{"reserved after key info", edit(func(b []byte) { b[0x4e] = 1 }), 0x4e, "reserved"},
		{"reserved after cpuid", edit(func(b []byte) { b[0x19f] = 1 }), 0x19f, "reserved"},
		{"v5 fields in a v3 report", edit(func(b []byte) { b[0x1f8] = 3 }), 0x1f8, "reserved"},
		{"signature R past 48 bytes", edit(func(b []byte) { b[0x2a0+50] = 1 }), 0x2a0 + 50, "SIGNATURE.R"},
		{"signature reserved", edit(func(b []byte) { b[0x49f] = 1 }), 0x49f, "SIGNATURE reserved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSNPReport(tc.in)
			var e *EventLogError
			if !errors.As(err, &e) || e.Offset != tc.offset || e.Field != tc.field || e.Input != "SNP report" {
				t.Fatalf("error %v, expected SNP report offset %#x field %s", err, tc.offset, tc.field)
			}
		})
	}
	if _, err := DecodeSNPReport([]byte(strings.Repeat("zz", SNPReportSize))); err == nil {
		t.Error("non-hex text of report length accepted")
	}
}

// snpReference computes berth's values for the test firmware, kernel,
// initrd and command line, for Milan and Genoa and 1-2 vCPUs.
func snpReference(t *testing.T) *Document {
	t.Helper()
	cmd := "console=ttyS0"
	var docs []*Document
	for _, line := range []ProductLine{Milan, Genoa} {
		d, err := SNP(SNPRequest{Firmware: File("testdata/OVMF.amdsev.fd"), Kernel: File("testdata/kernel-synthetic.bin"),
			Initrd: File("testdata/initrd-synthetic.bin"), Cmdline: &cmd, VCPUs: VCPURange{1, 2}, ProductLine: line,
			GuestFeatures: DefaultGuestFeatures, GuestPolicy: DefaultGuestPolicy})
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	docs[0].SNP.Sets = append(docs[0].SNP.Sets, docs[1].SNP.Sets...)
	return docs[0]
}

func TestExplainSNP(t *testing.T) {
	ref := snpReference(t)
	genoa2 := ref.SNP.Sets[1].LaunchDigests[1].Digest
	milan1 := ref.SNP.Sets[0].LaunchDigests[0].Digest
	init, err := InitData("kata-default-initdata.toml", mustRead(t, "testdata/initdata/kata-default-initdata.toml"), "snp")
	if err != nil {
		t.Fatal(err)
	}
	hostData, _ := hex.DecodeString(init.HostData)
	// The real Genoa report, relaunched as berth's guest would be: the
	// default policy and the expected MEASUREMENT.
	report := func(f func(b []byte)) *SNPReport {
		b := bytes.Clone(readSNPReport(t, "trustee-az-genoa-report.bin"))
		binary.LittleEndian.PutUint64(b[0x8:], DefaultGuestPolicy)
		copy(b[0x90:], genoa2[:])
		f(b)
		r, err := ParseSNPReport(b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	withInit := *ref
	withInit.InitData = init
	for _, tc := range []struct {
		name  string
		r     *SNPReport
		ref   *Document
		first string
		want  []string
	}{
		{"all match", report(func([]byte) {}), ref, "", []string{"Genoa, 2 vCPUs"}},
		{"real report as is", mustParseSNP(t, readSNPReport(t, "trustee-az-genoa-report.bin")), ref, "POLICY", []string{"minimum ABI 0.31 instead of 0.0"}},
		{"debug policy", report(func(b []byte) { b[0xa] |= 0x8 }), ref, "POLICY", []string{"DEBUG (19) set", "must not be trusted"}},
		{"another measurement", report(func(b []byte) { b[0x90] ^= 1 }), ref, "MEASUREMENT", []string{"a vCPU count outside 1-2", "another kernel command line"}},
		{"milan vCPU type on a genoa host", report(func(b []byte) { copy(b[0x90:], milan1[:]) }), ref, "", []string{"Milan, 1 vCPUs (the report's host is Genoa"}},
		{"no genoa values", report(func(b []byte) { b[0x90] ^= 1 }), &Document{SNP: &SNPValues{GuestPolicy: DefaultGuestPolicy, Sets: ref.SNP.Sets[:1]}}, "MEASUREMENT", []string{"comes from a Genoa host and the reference has no Genoa values"}},
		{"host data expected", report(func([]byte) {}), &withInit, "HOST_DATA", []string{"started without init-data"}},
		{"host data matches", report(func(b []byte) { copy(b[0xc0:], hostData) }), &withInit, "", nil},
		{"host data unexpected", report(func(b []byte) { b[0xc0] = 1 }), ref, "HOST_DATA", []string{"give refvalues --initdata"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := ExplainSNP(tc.r, tc.ref)
			first := ""
			if x.First != nil {
				first = x.First.Field
			}
			if first != tc.first || x.Any() != (tc.first != "") {
				t.Fatalf("first mismatch %q, expected %q: %+v", first, tc.first, x.Checks)
			}
			var out bytes.Buffer
			if err := x.WriteTable(&out); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.want {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
}

func TestExplainSNPTCB(t *testing.T) {
	ref := snpReference(t)
	v := func(n uint8) *uint8 { return &n }
	ref.SNP.Sets[1].MinimumTCB = &MinimumTCB{Fields: []TCBValue{{TCBField: TCBField{Name: "snp", Byte: 6}, Value: v(0xff)}}}
	b := bytes.Clone(readSNPReport(t, "trustee-az-genoa-report.bin"))
	binary.LittleEndian.PutUint64(b[0x8:], DefaultGuestPolicy)
	copy(b[0x90:], ref.SNP.Sets[1].LaunchDigests[0].Digest[:])
	x := ExplainSNP(mustParseSNP(t, b), ref)
	if x.First == nil || x.First.Field != "REPORTED_TCB" || !strings.Contains(x.First.Cause, "snp") {
		t.Fatalf("%+v", x.Checks)
	}
}

func mustParseSNP(t *testing.T, b []byte) *SNPReport {
	t.Helper()
	r, err := ParseSNPReport(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReferenceSNP: berth's own -o json reads back.
func TestReferenceSNP(t *testing.T) {
	ref := snpReference(t)
	b, err := json.MarshalIndent(ref, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReferenceSNP("ref.json", b)
	if err != nil {
		t.Fatal(err)
	}
	if got.SNP.GuestPolicy != ref.SNP.GuestPolicy || got.SNP.Sets[1].LaunchDigests[1].Digest != ref.SNP.Sets[1].LaunchDigests[1].Digest {
		t.Errorf("read back %+v", got.SNP)
	}
	if _, err := ReferenceSNP("x.json", []byte(`{"schemaVersion":"berth.dev/refvalues/v1","tee":"tdx"}`)); err == nil || !strings.Contains(err.Error(), "x.json: no snp.sets") {
		t.Errorf("TDX document: %v", err)
	}
}
