package discover

import (
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testproc"
)

func TestFilterBootLog(t *testing.T) {
	in := "[    0.000000] Linux version 6.8\n" +
		"[    5.123456] ccp 0000:01:00.5: SEV-SNP API:1.55 build:38\n" +
		"6,1234,5678,-;kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)\n" +
		" SUBSYSTEM=pci\n" +
		"<6>AMD-Vi: IOMMU SNP support enabled\r\n" +
		"Jan  1 00:00:00 host kernel: virt/tdx: module initialized\n" +
		// The firmware lock on VT-x/AMD-V is the cause of a missing
		// vmx/svm flag and /dev/kvm; these lines name no subsystem
		// keyword but must be kept (arch/x86/kernel/cpu/amd.c, feat_ctl.c).
		"[    0.093507] SVM disabled (by BIOS) in MSR_VM_CR\n" +
		"[    0.021000] x86/cpu: VMX (outside TXT) disabled by BIOS\n" +
		"[    0.100000] smpboot: CPU0: AMD EPYC 7763 64-Core Processor\n" +
		// Only ASCII case is ignored; other UTF-8 is kept as it is.
		"[    0.200000] gerät: Kvm bereit\n" +
		"[    0.300000] \u212aVM is a Kelvin sign, not a K\n"
	got := filterBootLog(in)
	want := []string{
		"ccp 0000:01:00.5: SEV-SNP API:1.55 build:38",
		"kvm_amd: SEV-SNP enabled (ASIDs 1 - 99)",
		"AMD-Vi: IOMMU SNP support enabled",
		"Jan  1 00:00:00 host kernel: virt/tdx: module initialized",
		"SVM disabled (by BIOS) in MSR_VM_CR",
		"x86/cpu: VMX (outside TXT) disabled by BIOS",
		"gerät: Kvm bereit",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if n := len(filterBootLog(strings.Repeat("kvm line\n", 1000))); n != maxBootLines {
		t.Errorf("kept %d lines, want cap %d", n, maxBootLines)
	}
}

// TestBootLogKeywordsShape: keywordLines indexes the keywords by their
// first three bytes in a 32-bit mask and compares them with lowered text.
func TestBootLogKeywordsShape(t *testing.T) {
	if len(bootLogKeywords) > 32 {
		t.Errorf("%d keywords, keywordLines holds at most 32", len(bootLogKeywords))
	}
	for _, k := range bootLogKeywords {
		if len(k) < 3 || k != strings.ToLower(k) || strings.ContainsRune(k, '\n') {
			t.Errorf("keyword %q: want three bytes or more, lower case, one line", k)
		}
	}
}

func FuzzFilterBootLog(f *testing.F) {
	f.Add("[    5.1] ccp 0000:01:00.5: SEV-SNP API:1.55 build:38\n6,1,2,-;kvm: x\n<6>DMAR: y\n")
	f.Add("kvm\nKVM\n\n kvm\n[ 1.0] \r\nx Sev\r\namd-vI kvm sgx\nno\n")
	f.Fuzz(func(t *testing.T, s string) {
		got := filterBootLog(s)
		for _, l := range got {
			if strings.ContainsRune(l, '\n') || l == "" {
				t.Fatalf("bad line %q", l)
			}
		}
		if want := filterBootLogEveryLine(s); !slices.Equal(got, want) {
			t.Fatalf("filterBootLog = %q, line by line %q", got, want)
		}
		if b := filterBootLog([]byte(s)); !slices.Equal(b, got) {
			t.Fatalf("filterBootLog of the bytes = %q, of the string %q", b, got)
		}
	})
}

// filterBootLogEveryLine is what filterBootLog must give: every line of
// text taken through filterBootLine, in order, up to maxBootLines kept.
func filterBootLogEveryLine(text string) []string {
	keywords := make([][]byte, len(bootLogKeywords))
	for i, k := range bootLogKeywords {
		keywords[i] = []byte(k)
	}
	var out []string
	var low []byte
	for _, l := range strings.Split(text, "\n") {
		if len(out) == maxBootLines {
			break
		}
		if kept, ok := filterBootLine(l, &low, keywords); ok {
			out = append(out, kept)
		}
	}
	return out
}

// BenchmarkFilterBootLog filters this machine's kernel log, read as berth
// reads it (dev/kmsg, a thousand records or more on a booted host).
func BenchmarkFilterBootLog(b *testing.B) {
	root, err := hostfs.NewLive("/")
	if err != nil {
		b.Fatal(err)
	}
	text, err := root.KernelLog()
	if err != nil {
		b.Fatalf("reading the kernel log (needs root): %v", err)
	}
	s := string(text)
	for _, bc := range []struct {
		name   string
		filter func(string) []string
	}{{"filterBootLog", filterBootLog[string]}, {"everyLine", filterBootLogEveryLine}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			b.ReportAllocs()
			cpu0 := testproc.CPUTime(b)
			for b.Loop() {
				bc.filter(s)
			}
			b.ReportMetric(float64((testproc.CPUTime(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
