package discover

import (
	"context"
	"testing"

	"berth.dev/berth/bench/benchhost"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testproc"
)

// generatedHost writes spec's host root into a temporary directory.
func generatedHost(b *testing.B, spec benchhost.Spec) (string, benchhost.Summary) {
	b.Helper()
	dir := b.TempDir()
	sum, err := benchhost.Write(dir, spec)
	if err != nil {
		b.Fatal(err)
	}
	return dir, sum
}

// BenchmarkPCIGeneratedHost reads the PCI functions of the generated
// hosts (bench/benchhost): the base GPU node and the 4,096-function one.
// ns/function is the per-device cost (issue #17's P2b: 15 us).
func BenchmarkPCIGeneratedHost(b *testing.B) {
	for _, tc := range []struct {
		name string
		spec benchhost.Spec
	}{{"base", benchhost.Base()}, {"large", benchhost.Large()}} {
		b.Run(tc.name, func(b *testing.B) {
			dir, sum := generatedHost(b, tc.spec)
			root, err := hostfs.OpenDir(dir)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := testproc.CPUTime(b)
			for b.Loop() {
				s := &session{root: root}
				var f facts.Facts
				runPCI(context.Background(), s, &f)
				if len(f.PCI) != sum.Functions || len(f.Unknown)+len(s.unknown) != 0 {
					b.Fatalf("%d functions, want %d; unknown %v", len(f.PCI), sum.Functions, s.unknown)
				}
			}
			per := float64(b.N) * float64(sum.Functions)
			// CPU time (user and system, all threads) per function: what
			// wall time would be on an idle machine with one core, and
			// unlike wall time hardly moved by other load.
			b.ReportMetric(float64((testproc.CPUTime(b)-cpu0).Nanoseconds())/per, "cpu-ns/function")
		})
	}
}

// BenchmarkDiscoverGeneratedHost runs the whole discovery on the large
// generated host as a directory root (berth facts --root).
func BenchmarkDiscoverGeneratedHost(b *testing.B) {
	dir, sum := generatedHost(b, benchhost.Large())
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		f := Run(context.Background(), root, Options{})
		if len(f.PCI) != sum.Functions {
			b.Fatalf("%d functions, want %d", len(f.PCI), sum.Functions)
		}
	}
}

// BenchmarkStaticVersionGeneratedHost looks up the versions of the
// generated host's QEMU (version line in 1.8 MB of .rodata of a 20 MB
// file) and containerd (no Go build info, as Debian's: the 2.7 MB package
// database answers), as a live root does.
func BenchmarkStaticVersionGeneratedHost(b *testing.B) {
	dir, _ := generatedHost(b, benchhost.Base())
	root, err := hostfs.NewLive(dir)
	if err != nil {
		b.Fatal(err)
	}
	specs := binarySpecs("")
	want := map[string]staticVersion{
		"usr/bin/qemu-system-x86_64": {Version: "7.2.22", Vendor: "Debian 1:7.2+dfsg-7+deb12u18+b3", From: fromFile},
		"usr/bin/containerd":         {Version: "1.6.20", Vendor: "Debian 1.6.20~ds1-1+deb12u3", From: fromPackage + "containerd"},
	}
	spec := func(p string) binarySpec {
		for _, sp := range specs {
			for _, f := range sp.files {
				if f == p {
					return sp
				}
			}
		}
		b.Fatalf("no spec lists %s", p)
		return binarySpec{}
	}
	b.ReportAllocs()
	cpu0 := testproc.CPUTime(b)
	for b.Loop() {
		l := newStaticLookup(&session{root: root}, specs)
		for p, w := range want {
			got, ok := l.lookup(spec(p), p, p)
			if !ok || got != w {
				b.Fatalf("%s: got %+v (%v), want %+v", p, got, ok, w)
			}
		}
	}
	b.ReportMetric(float64((testproc.CPUTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkDiscoverLive runs the whole discovery on this machine's root,
// without the QEMU probe, as `berth facts` does.
func BenchmarkDiscoverLive(b *testing.B) {
	root, err := hostfs.NewLive("/")
	if err != nil {
		b.Fatal(err)
	}
	// once: a command's single discovery; agent: the agent's every
	// interval after the first, with the kernel log followed and the
	// binaries' versions kept while their files are unchanged.
	for _, bc := range []struct {
		name  string
		agent bool
	}{{"once", false}, {"agent", true}} {
		b.Run(bc.name, func(b *testing.B) {
			opt := Options{PCIIDs: "/usr/share/misc/pci.ids"}
			if bc.agent {
				opt.KernelLog, opt.Cache = NewKernelLogFollower(root), NewFileCache()
				defer opt.KernelLog.Close()
				Run(context.Background(), root, opt)
			}
			b.ReportAllocs()
			cpu0 := testproc.CPUTime(b)
			for b.Loop() {
				Run(context.Background(), root, opt)
			}
			b.ReportMetric(float64((testproc.CPUTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
