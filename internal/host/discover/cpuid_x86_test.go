//go:build amd64 || 386

package discover

import (
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/cpuid/v2"
)

// TestCPUIDMatchesCpuidV2 holds readCPUID to what
// github.com/klauspost/cpuid/v2 reports on the machine the test runs on,
// for every feature berth reports and the hypervisor vendor: discover
// used that package, and the names in Facts are its names.
func TestCPUIDMatchesCpuidV2(t *testing.T) {
	ids := []cpuid.FeatureID{
		cpuid.HYPERVISOR, cpuid.SEV, cpuid.SEV_ES, cpuid.SEV_SNP, cpuid.SGX, cpuid.SGXLC,
		cpuid.SME, cpuid.SVM, cpuid.TDX_GUEST, cpuid.TME, cpuid.VMX,
	}
	var want []string
	for _, id := range ids {
		if cpuid.CPU.Supports(id) {
			want = append(want, id.String())
		}
	}
	slices.Sort(want)
	hv, got := readCPUID()
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("features %q, cpuid/v2 %q", got, want)
	}
	if wantHV := strings.TrimRight(cpuid.CPU.HypervisorVendorString, "\x00"); hv != wantHV {
		t.Errorf("hypervisor vendor %q, cpuid/v2 %q", hv, wantHV)
	}
	t.Logf("%s: hypervisor %q, features %q", cpuid.CPU.BrandName, hv, got)
}

func TestCPUIDRegsString(t *testing.T) {
	for _, tc := range []struct {
		regs []uint32
		want string
	}{
		{[]uint32{0x68747541, 0x69746e65, 0x444d4163}, "AuthenticAMD"},
		{[]uint32{0x4b4d564b, 0x564b4d56, 0x0000004d}, "KVMKVMKVM"},
		{[]uint32{0, 0x41414141}, ""},
		{[]uint32{0x00004141}, "AA"},
	} {
		if got := cpuidRegsString(tc.regs...); got != tc.want {
			t.Errorf("cpuidRegsString(%#x) = %q, want %q", tc.regs, got, tc.want)
		}
	}
}
