package refvalues

import (
	"bytes"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/testkit/goldenfile"
)

func TestDocumentGolden(t *testing.T) {
	cmdline := "console=ttyS0"
	tests := []struct {
		name string
		doc  func() (*Document, error)
	}{
		{"snp-all-lines", func() (*Document, error) {
			return SNP(SNPRequest{
				Firmware: File("testdata/OVMF.amdsev.fd"), Kernel: File("testdata/kernel-synthetic.bin"),
				Initrd: File("testdata/initrd-synthetic.bin"), Cmdline: &cmdline,
				VCPUs: VCPURange{1, 2}, GuestFeatures: DefaultGuestFeatures, GuestPolicy: DefaultGuestPolicy,
			})
		}},
		{"snp-genoa-no-kernel", func() (*Document, error) {
			return SNP(SNPRequest{
				Firmware: File("testdata/OVMF.amdsev.fd"), VCPUs: VCPURange{4, 4}, ProductLine: Genoa,
				GuestFeatures: 0x21, GuestPolicy: DefaultGuestPolicy,
			})
		}},
		{"tdx-two-pass", func() (*Document, error) {
			return TDX(TDXRequest{Firmware: File("testdata/OVMF.inteltdx.ms.fd"), PageOrder: TwoPass})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := tt.doc()
			if err != nil {
				t.Fatal(err)
			}
			goldenfile.AssertJSON(t, filepath.Join("testdata", "golden", tt.name+".json"), doc)
			var tab bytes.Buffer
			if err := doc.WriteTable(&tab); err != nil {
				t.Fatal(err)
			}
			goldenfile.Assert(t, filepath.Join("testdata", "golden", tt.name+".txt"), tab.Bytes())
		})
	}
}

// TestSNPDocumentMatchesVectors ties the high-level API to the vectors: the
// document for D1/D2/D3's inputs carries their digests.
func TestSNPDocumentMatchesVectors(t *testing.T) {
	cmdline := "console=ttyS0"
	doc, err := SNP(SNPRequest{
		Firmware: File("testdata/OVMF.amdsev.fd"), Kernel: File("testdata/kernel-synthetic.bin"),
		Initrd: File("testdata/initrd-synthetic.bin"), Cmdline: &cmdline,
		VCPUs: VCPURange{1, 2}, GuestFeatures: DefaultGuestFeatures, GuestPolicy: DefaultGuestPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, row := range readPSV(t, "vectors-snp.psv", 8) {
		if len(row) == 8 && row[1] == "kernel-synthetic.bin" && row[2] == "initrd-synthetic.bin" && row[3] == cmdline && row[6] == "0x1" {
			want[row[5]+"/"+row[4]] = row[7]
		}
	}
	if len(want) < 3 {
		t.Fatalf("expected D1-D3 in the vectors, found %d", len(want))
	}
	for _, set := range doc.SNP.Sets {
		for _, ld := range set.LaunchDigests {
			key := set.VCPUType + "/" + string(rune('0'+ld.VCPUs))
			if w, ok := want[key]; ok && ld.Digest.String() != w {
				t.Errorf("%s: %s, want %s", key, ld.Digest, w)
			}
			delete(want, key)
		}
	}
	if len(want) != 0 {
		t.Errorf("vectors not covered by the document: %v", want)
	}
	if doc.SNP.FirmwareDigest.String() != "9d0dd8be18c86e3fe3bf0038ed75ebf5340bee69fd2632c8ff9409964575960ae1f7e84be387d2e3467bc3508d1e4806" {
		t.Errorf("firmware digest %s", doc.SNP.FirmwareDigest)
	}
}

func TestSNPRequestErrors(t *testing.T) {
	cmdline := "x"
	fw := File("testdata/OVMF.amdsev.fd")
	ok := SNPRequest{Firmware: fw, VCPUs: VCPURange{1, 1}, GuestFeatures: 1, GuestPolicy: DefaultGuestPolicy}
	tests := []struct {
		name   string
		mutate func(*SNPRequest)
		want   string
	}{
		{"no firmware", func(r *SNPRequest) { r.Firmware = Component{} }, "no firmware"},
		{"missing firmware file", func(r *SNPRequest) { r.Firmware = File("testdata/nope.fd") }, "nope.fd"},
		{"cmdline without kernel", func(r *SNPRequest) { r.Cmdline = &cmdline }, "without a kernel"},
		{"zero vCPUs", func(r *SNPRequest) { r.VCPUs = VCPURange{0, 0} }, "out of range"},
		{"too many vCPUs", func(r *SNPRequest) { r.VCPUs = VCPURange{1, 513} }, "out of range"},
		{"features without SNPActive", func(r *SNPRequest) { r.GuestFeatures = 0x20 }, "SNPActive"},
		{"policy without bit 17", func(r *SNPRequest) { r.GuestPolicy = 0x10000 }, "bit 17"},
		{"TDX firmware with a kernel", func(r *SNPRequest) {
			r.Firmware = File("testdata/OVMF.inteltdx.ms.fd")
			r.Kernel = File("testdata/kernel-synthetic.bin")
		}, "SNP_KERNEL_HASHES"},
		{"not a firmware", func(r *SNPRequest) { r.Firmware = Reader("zeros", bytes.NewReader(make([]byte, 8192))) }, "no OVMF footer table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ok
			tt.mutate(&r)
			_, err := SNP(r)
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tt.want)) {
				t.Fatalf("SNP error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
