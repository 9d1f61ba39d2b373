//go:build unix

package refvalues

import (
	"bytes"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit/testproc"
)

// report adds wall and CPU milliseconds per operation.
func report(b *testing.B, start time.Time, cpu0 time.Duration) {
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/op")
	b.ReportMetric(float64((testproc.CPUTime(b)-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

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
			start, cpu0 := time.Now(), testproc.CPUTime(b)
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
			report(b, start, cpu0)
		})
	}
}

// BenchmarkMRTD measures parsing a 4 MiB TDVF image and computing MRTD.
// Budget: 50 ms.
func BenchmarkMRTD(b *testing.B) {
	fw := readTestdata(b, "OVMF.inteltdx.ms.fd")
	start, cpu0 := time.Now(), testproc.CPUTime(b)
	for b.Loop() {
		if _, err := TDX(TDXRequest{Firmware: Reader("fw", bytes.NewReader(fw))}); err != nil {
			b.Fatal(err)
		}
	}
	report(b, start, cpu0)
}
