package catalog

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// TestCausalOrder: a check whose failure causes another check's evidence is
// that check's ancestor, so that it is evaluated, and named as the first
// blocker, before its symptom.
func TestCausalOrder(t *testing.T) {
	cs := All()
	parent := map[string]string{}
	pos := map[string]int{}
	for i, c := range cs {
		parent[c.ID], pos[c.ID] = c.Parent, i
	}
	ancestor := func(a, c string) bool {
		for p := parent[c]; p != ""; p = parent[p] {
			if p == a {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct{ cause, symptom, why string }{
		{"snp.asids", "snp.kvm.params", "kvm_amd turns sev_es/sev_snp off when the BIOS leaves no SEV-ES/SNP ASIDs"},
		{"snp.kernel.version", "snp.bios.rmp", "only an SNP host kernel reports the RMP"},
		{"snp.kernel.version", "snp.bios.enabled", "only an SNP host kernel knows the sev_snp flag"},
		{"snp.bios.rmp", "snp.bios.enabled", "the kernel clears sev_snp when the RMP is not reserved"},
		{"snp.bios.enabled", "snp.firmware.version", "no SEV firmware lines with SEV off in the BIOS"},
		{"tdx.kernel.version", "tdx.bios.keyids", "only a TDX host kernel reports the BIOS KeyIDs"},
		{"tdx.bios.keyids", "tdx.module", "the module needs KeyIDs"},
		{"tdx.hibernation", "tdx.module", "hibernation stops the module"},
		{"tdx.module", "tdx.kvm.param", "kvm_intel.tdx needs the module"},
	} {
		if !ancestor(tc.cause, tc.symptom) {
			t.Errorf("%s is not an ancestor of %s (%s)", tc.cause, tc.symptom, tc.why)
		}
	}
	// Siblings whose order decides the first blocker.
	for _, tc := range [][2]string{{"iommu.enabled", "gpu.iommu.group"}, {"iommu.enabled", "gpu.vfio"}, {"gpu.iommu.group", "gpu.vfio"}} {
		if pos[tc[0]] > pos[tc[1]] {
			t.Errorf("%s comes after %s", tc[0], tc[1])
		}
	}
}

func evalOne(t *testing.T, f *facts.Facts, name string) check.Verdict {
	t.Helper()
	p, err := platform.Parse(name)
	if err != nil {
		t.Fatal(err)
	}
	return evaluator(t, f).Evaluate(f, []platform.Platform{p}, check.Options{})[0]
}

// TestSNPASIDsBeforeKVMParams is the snp-asids-all-sev host: every ASID
// went to plain SEV, so kvm_amd turned sev_es and sev_snp off by itself.
// The ASID split is the blocker, with a BIOS remedy, and the kvm_amd
// parameters (a symptom) are not evaluated.
func TestSNPASIDsBeforeKVMParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*facts.SNP)
	}{
		{"range line", func(s *facts.SNP) { s.SNPASIDs = &facts.Range{} }},
		{"only the SEV range", func(s *facts.SNP) { s.SNPASIDs, s.SEVASIDs = nil, &facts.Range{Min: 1, Max: 509} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := readyFacts()
			f.TEE.SNP.KVMSEVES, f.TEE.SNP.KVMSEVSNP = ptr(false), ptr(false)
			tc.set(&f.TEE.SNP)
			v := evalOne(t, f, "kubeadm-qemu-snp")
			if v.BlockedBy != "snp.asids" {
				t.Fatalf("blocked by %q, want snp.asids", v.BlockedBy)
			}
			if strings.Contains(v.Remedy, "kvm_amd.sev_snp=1") || !strings.Contains(v.Remedy, "BIOS") {
				t.Errorf("remedy %q: want the BIOS ASID setting, not a kvm_amd parameter", v.Remedy)
			}
			if fd := findingOf(t, v, "snp.kvm.params"); fd.Status != check.Skip {
				t.Errorf("snp.kvm.params is %s, want skip", fd.Status)
			}
		})
	}
	f := readyFacts()
	f.TEE.SNP.SNPASIDs, f.TEE.SNP.SEVASIDs = nil, &facts.Range{Min: 100, Max: 509}
	if fd := findingOf(t, evalOne(t, f, "kubeadm-qemu-snp"), "snp.asids"); fd.Status != check.Pass {
		t.Errorf("SEV from ASID 100: snp.asids is %s, want pass", fd.Status)
	}
	f.TEE.SNP.SEVASIDs = nil
	if fd := findingOf(t, evalOne(t, f, "kubeadm-qemu-snp"), "snp.asids"); fd.Status != check.Unknown {
		t.Errorf("no ASID lines: snp.asids is %s, want unknown", fd.Status)
	}
}

// tdxFacts is an Emerald Rapids host with a TDX host kernel and TDX on.
func tdxFacts() *facts.Facts {
	f := readyFacts()
	f.CPU = facts.CPU{Vendor: "intel", VendorID: "GenuineIntel", ProductLine: "emerald-rapids", Flags: []string{"vmx", "tdx_host_platform", "sgx"}}
	f.Kernel.Modules = map[string]facts.Module{"kvm": {Loaded: true}, "kvm_intel": {Loaded: true}}
	f.Kernel.Release = "6.17.0-20-generic"
	f.TEE.TDX = facts.TDX{KVMTDX: ptr(true), BIOSKeyIDs: &facts.Range{Min: 32, Max: 64}, ModuleInitialized: ptr(true), ModuleVersion: "1.5"}
	f.TEE.SGX = facts.SGX{Enclave: true, Provision: true}
	return f
}

// TestTDXKernelBeforeBIOS is the openshift-crio / gpu-h100-shared-group
// case: a kernel without TDX host support prints no KeyID line, so the
// BIOS state is not known; the kernel is the blocker.
func TestTDXKernelBeforeBIOS(t *testing.T) {
	for _, tc := range []struct {
		name      string
		set       func(*facts.Facts)
		blocker   string
		kernel    check.Status
		keyids    check.Status
		msgSubstr string
	}{
		{"no host support (config)", func(f *facts.Facts) {
			f.Kernel.Release, f.Kernel.Config["INTEL_TDX_HOST"] = "5.14.0-427.40.1.el9_4.x86_64", "n"
			f.TEE.TDX = facts.TDX{}
		}, "tdx.kernel.version", check.Fail, check.Skip, "CONFIG_INTEL_TDX_HOST"},
		{"no host support (old, no parameter)", func(f *facts.Facts) {
			f.Kernel.Release = "5.15.0-113-generic"
			f.TEE.TDX = facts.TDX{}
		}, "tdx.kernel.version", check.Fail, check.Skip, "6.16"},
		{"vendor kernel, BIOS off", func(f *facts.Facts) {
			f.Kernel.Release, f.Kernel.Config["INTEL_TDX_HOST"] = "6.8.0-1010-intel", "y"
			f.TEE.TDX = facts.TDX{KVMTDX: ptr(false)}
		}, "tdx.bios.keyids", check.Warn, check.Fail, "vendor"},
		{"upstream kernel, BIOS off", func(f *facts.Facts) {
			f.TEE.TDX = facts.TDX{KVMTDX: ptr(false)}
		}, "tdx.bios.keyids", check.Pass, check.Fail, ">= 6.16"},
		{"kernel unknown", func(f *facts.Facts) {
			f.Kernel.Release = ""
			f.TEE.TDX = facts.TDX{}
		}, "tdx.kvm.param", check.Unknown, check.Unknown, "not reported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tdxFacts()
			tc.set(f)
			v := evalOne(t, f, "kubeadm-qemu-tdx")
			if v.BlockedBy != tc.blocker {
				t.Errorf("blocked by %q, want %q", v.BlockedBy, tc.blocker)
			}
			k := findingOf(t, v, "tdx.kernel.version")
			if k.Raw != tc.kernel || !strings.Contains(k.Message, tc.msgSubstr) {
				t.Errorf("tdx.kernel.version: %s %q, want %s containing %q", k.Raw, k.Message, tc.kernel, tc.msgSubstr)
			}
			if fd := findingOf(t, v, "tdx.bios.keyids"); fd.Raw != tc.keyids {
				t.Errorf("tdx.bios.keyids: %s %q, want %s", fd.Raw, fd.Message, tc.keyids)
			}
		})
	}
}

// TestGPUNeedsIOMMUFirst: with the IOMMU off the GPU has no IOMMU group and
// vfio-pci cannot take it; iommu.enabled is the blocker and the group and
// binding checks cannot tell (unknown, not fail).
func TestGPUNeedsIOMMUFirst(t *testing.T) {
	f := readyFacts()
	f.IOMMU = facts.IOMMU{ACPITable: "IVRS"}
	f.GPUs[0].IOMMUGroup, f.GPUs[0].GroupIsolated, f.GPUs[0].VFIOBound, f.GPUs[0].Driver = nil, nil, false, "nvidia"
	v := evalOne(t, f, "kubeadm-qemu-none+gpu")
	if v.BlockedBy != "iommu.enabled" {
		t.Errorf("blocked by %q, want iommu.enabled", v.BlockedBy)
	}
	for _, id := range []string{"gpu.iommu.group", "gpu.vfio"} {
		if fd := findingOf(t, v, id); fd.Raw != check.Unknown || !strings.Contains(fd.Message, "iommu.enabled") {
			t.Errorf("%s: %s %q, want unknown naming iommu.enabled", id, fd.Raw, fd.Message)
		}
	}
	// With the IOMMU on, a GPU on nvidia is a binding failure.
	f = readyFacts()
	f.GPUs[0].VFIOBound, f.GPUs[0].Driver = false, "nvidia"
	if fd := findingOf(t, evalOne(t, f, "kubeadm-qemu-none+gpu"), "gpu.vfio"); fd.Raw != check.Fail {
		t.Errorf("gpu.vfio: %s, want fail", fd.Raw)
	}
}
