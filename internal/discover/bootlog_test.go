package discover

import (
	"strings"
	"testing"
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

func FuzzFilterBootLog(f *testing.F) {
	f.Add("[    5.1] ccp 0000:01:00.5: SEV-SNP API:1.55 build:38\n6,1,2,-;kvm: x\n<6>DMAR: y\n")
	f.Fuzz(func(t *testing.T, s string) {
		for _, l := range filterBootLog(s) {
			if strings.ContainsRune(l, '\n') || l == "" {
				t.Fatalf("bad line %q", l)
			}
		}
	})
}
