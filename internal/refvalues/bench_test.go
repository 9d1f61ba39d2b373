package refvalues

import (
	"bytes"
	"testing"
	"time"
)

// BenchmarkSNPDigest measures the whole SNP computation the CLI does for a
// 4 MiB firmware and a 12 MiB kernel, launch digests for 1..8 vCPUs, for
// one product line and for all three. Budget: 150 ms.
func BenchmarkSNPDigest(b *testing.B) {
	fw := readTestdata(b, "OVMF.amdsev.fd")
	kernel := bytes.Repeat(readTestdata(b, "kernel-synthetic.bin"), 12<<20/65536)
	initrd := readTestdata(b, "initrd-synthetic.bin")
	cmdline := "console=ttyS0"
	for _, tc := range []struct {
		name string
		line ProductLine
	}{{"genoa", Genoa}, {"all-product-lines", ""}} {
		b.Run(tc.name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				_, err := SNP(SNPRequest{
					Firmware: Reader("fw", bytes.NewReader(fw)),
					Kernel:   Reader("kernel", bytes.NewReader(kernel)),
					Initrd:   Reader("initrd", bytes.NewReader(initrd)),
					Cmdline:  &cmdline, VCPUs: VCPURange{1, 8}, ProductLine: tc.line,
					GuestFeatures: DefaultGuestFeatures, GuestPolicy: DefaultGuestPolicy,
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/op")
		})
	}
}

// BenchmarkMRTD measures parsing a 4 MiB TDVF image and computing MRTD.
// Budget: 50 ms.
func BenchmarkMRTD(b *testing.B) {
	fw := readTestdata(b, "OVMF.inteltdx.ms.fd")
	start := time.Now()
	for b.Loop() {
		if _, err := TDX(TDXRequest{Firmware: Reader("fw", bytes.NewReader(fw))}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/op")
}
