//go:build amd64 || 386

package discover

import "slices"

// cpuidLeaf executes CPUID with EAX=leaf and ECX=sub.
func cpuidLeaf(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// haveCPUID is true where the CPUID instruction exists.
const haveCPUID = true

// cpuidRegsString is the text of CPUID registers in the order given, up
// to the first NUL byte (vendor strings are padded with spaces or NULs).
func cpuidRegsString(regs ...uint32) string {
	b := make([]byte, 0, 4*len(regs))
	for _, r := range regs {
		for i := range 4 {
			c := byte(r >> (8 * i))
			if c == 0 {
				return string(b)
			}
			b = append(b, c)
		}
	}
	return string(b)
}

// readCPUID executes CPUID for the features berth reports, under the names
// and with the conditions of github.com/klauspost/cpuid/v2, which discover
// used before: that package probes some hundred leaves at program start,
// each a VM exit in a guest, in every command of berth, where these few
// leaves are read only when discovery asks. TestCPUIDMatchesCpuidV2 holds
// the two to the same answer.
func readCPUID() (hypervisorVendor string, features []string) {
	maxLeaf, b, c, d := cpuidLeaf(0, 0)
	amd := cpuidRegsString(b, d, c) == "AuthenticAMD"
	_, b, c, d = cpuidLeaf(0x40000000, 0)
	hypervisorVendor = cpuidRegsString(b, c, d)
	if maxLeaf < 1 {
		return hypervisorVendor, nil
	}
	set := func(on bool, name string) {
		if on {
			features = append(features, name)
		}
	}
	_, _, c, _ = cpuidLeaf(1, 0)
	set(c&(1<<5) != 0, "VMX")
	set(c&(1<<31) != 0, "HYPERVISOR")
	if maxLeaf >= 7 {
		_, b, c, _ = cpuidLeaf(7, 0)
		set(b&(1<<2) != 0, "SGX")
		set(c&(1<<13) != 0, "TME")
		set(c&(1<<30) != 0, "SGXLC")
	}
	maxExt, _, _, _ := cpuidLeaf(0x80000000, 0)
	if maxExt >= 0x80000001 {
		_, _, c, _ = cpuidLeaf(0x80000001, 0)
		set(c&(1<<2) != 0, "SVM")
	}
	if maxExt >= 0x8000001f && amd {
		a, _, _, _ := cpuidLeaf(0x8000001f, 0)
		set(a&(1<<0) != 0, "SME")
		set(a&(1<<1) != 0, "SEV")
		set(a&(1<<3) != 0, "SEV_ES")
		set(a&(1<<4) != 0, "SEV_SNP")
	}
	tdx := false
	if maxLeaf >= 0x20 {
		// Hyper-V hides the TDX leaf from its guests and reports the
		// isolation type in its own leaf instead.
		_, b, _, _ = cpuidLeaf(0x4000000C, 0)
		tdx = b == 0xbe3
	}
	if maxLeaf >= 0x21 {
		_, b, c, d = cpuidLeaf(0x21, 0)
		tdx = tdx || cpuidRegsString(b, d, c) == "IntelTDX    "
	}
	set(tdx, "TDX_GUEST")
	slices.Sort(features)
	return hypervisorVendor, features
}
