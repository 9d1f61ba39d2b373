package catalog

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

// TestDiagnosis: where the symptom and the cause differ, the first blocker
// names the cause (in its message and remedy), and a check whose evidence
// cannot exist because of it is UNKNOWN with that reason. Each case is one
// of the diagnosis fixture hosts under testdata/hosts, reduced to the facts
// that decide it.
func TestDiagnosis(t *testing.T) {
	tdxCmdline := "ro nohibernate kvm_intel.tdx=1"
	tests := []struct {
		name     string
		ready    func() *facts.Facts
		mutate   func(f *facts.Facts)
		platform string
		blocker  string
		// want are substrings of the blocker's message and remedy.
		want []string
		// unknown are checks that must be UNKNOWN naming the blocker.
		unknown map[string]string
	}{{
		// tdx-pamt-no-memory
		name: "tdx pamt enomem fails kvm_intel", ready: readyTDXFacts,
		mutate: func(f *facts.Facts) {
			f.Kernel.Cmdline = tdxCmdline
			f.Kernel.Modules = map[string]facts.Module{"kvm": {Loaded: true}}
			delete(f.Devices.Nodes, "dev/kvm")
			f.TEE.TDX = facts.TDX{BIOSKeyIDs: &facts.Range{Min: 32, Max: 63}, ModuleInitialized: ptr(false), ModuleError: "module initialization failed (-12)"}
		},
		platform: "kubeadm-qemu-none", blocker: "kvm.module",
		want: []string{"kvm_intel.tdx=1", "module initialization failed (-12)", "tdx.module"},
	}, {
		name: "tdx pamt enomem names the PAMT", ready: readyTDXFacts,
		mutate: func(f *facts.Facts) {
			f.TEE.TDX.ModuleInitialized, f.TEE.TDX.ModuleError, f.TEE.TDX.KVMTDX = ptr(false), "module initialization failed (-12)", ptr(false)
		},
		platform: "kubeadm-qemu-tdx", blocker: "tdx.module",
		want: []string{"PAMT", "hugepage"},
	}, {
		// tdx-module-not-loaded
		name: "tdx module not loaded names the SEAM loader", ready: readyTDXFacts,
		mutate: func(f *facts.Facts) {
			f.TEE.TDX.ModuleInitialized, f.TEE.TDX.ModuleError, f.TEE.TDX.KVMTDX = ptr(false), "module not loaded", ptr(false)
		},
		platform: "kubeadm-qemu-tdx", blocker: "tdx.module",
		want: []string{"SEAM loader", "SEAM Loader"},
	}, {
		// tdx-kvm-param-typo
		name: "tdx kvm_intel.tdx misspelled", ready: readyTDXFacts,
		mutate: func(f *facts.Facts) {
			f.Kernel.Cmdline = "ro nohibernate kvm_inte.tdx=1"
			f.TEE.TDX.ModuleInitialized, f.TEE.TDX.KVMTDX = nil, ptr(false)
		},
		platform: "kubeadm-qemu-tdx", blocker: "tdx.kvm.param",
		want:    []string{"kvm_inte.tdx=1", "did you mean kvm_intel.tdx", "kvm_intel.tdx=1"},
		unknown: map[string]string{"tdx.module": "tdx.kvm.param"},
	}, {
		// tdx-virt-at-load-off
		name: "tdx needs kvm.enable_virt_at_load", ready: readyTDXFacts,
		mutate: func(f *facts.Facts) {
			f.Kernel.Cmdline = tdxCmdline + " kvm.enable_virt_at_load=0"
			f.Kernel.Modules["kvm"] = facts.Module{Loaded: true, Params: map[string]string{"enable_virt_at_load": "N"}}
			f.TEE.TDX.ModuleInitialized, f.TEE.TDX.KVMTDX = nil, ptr(false)
		},
		platform: "kubeadm-qemu-tdx", blocker: "tdx.kvm.param",
		want:    []string{"enable_virt_at_load", "remove kvm.enable_virt_at_load=0"},
		unknown: map[string]string{"tdx.module": "tdx.kvm.param"},
	}, {
		// iommu-cmdline-off
		name: "iommu off on the command line", ready: readyFacts,
		mutate: func(f *facts.Facts) {
			f.IOMMU = facts.IOMMU{ACPITable: "DMAR", CmdlineFlags: []string{"intel_iommu=off"}}
			f.GPUs[0].IOMMUGroup, f.GPUs[0].GroupIsolated, f.GPUs[0].VFIOBound, f.GPUs[0].Driver = nil, nil, false, "nvidia"
		},
		platform: "kubeadm-qemu-none+gpu", blocker: "iommu.enabled",
		want:    []string{"intel_iommu=off", "remove intel_iommu=off"},
		unknown: map[string]string{"gpu.iommu.group": "iommu.enabled", "gpu.vfio": "iommu.enabled"},
	}, {
		// snp-iommu-off
		name: "snp with amd_iommu=off", ready: readyFacts,
		mutate: func(f *facts.Facts) {
			f.IOMMU = facts.IOMMU{ACPITable: "IVRS", CmdlineFlags: []string{"amd_iommu=off"}}
			f.TEE.SNP.IOMMUSNP, f.TEE.SNP.KVMSEVSNP, f.TEE.SNP.SNPASIDs = nil, ptr(false), nil
			f.TEE.SNP.SEVASIDs = &facts.Range{Min: 100, Max: 1006}
		},
		platform: "kubeadm-qemu-snp", blocker: "snp.iommu",
		want: []string{"amd_iommu=off", "sev_snp=N is its symptom", "remove amd_iommu=off"},
	}, {
		// snp-iommu-passthrough
		name: "snp with iommu=pt", ready: readyFacts,
		mutate: func(f *facts.Facts) {
			f.IOMMU.CmdlineFlags = []string{"amd_iommu=on", "iommu=pt"}
			f.TEE.SNP.IOMMUSNP, f.TEE.SNP.KVMSEVSNP = ptr(false), ptr(false)
		},
		platform: "kubeadm-qemu-snp", blocker: "snp.iommu",
		want: []string{"passthrough", "remove iommu=pt"},
	}, {
		// kvm-bios-svm-off
		name: "svm locked off by the firmware", ready: readyFacts,
		mutate: func(f *facts.Facts) {
			f.CPU.Flags = []string{"sme"}
			f.Kernel.BootLog = []string{"SVM disabled (by BIOS) in MSR_VM_CR", "kvm_amd: SVM not supported by CPU 0"}
			f.Kernel.Modules = map[string]facts.Module{"kvm": {Loaded: true}}
			delete(f.Devices.Nodes, "dev/kvm")
			f.Devices.KVM = &facts.KVMProbe{Errno: "ENOENT"}
		},
		platform: "kubeadm-qemu-none", blocker: "virt.hardware",
		want: []string{"SVM disabled (by BIOS) in MSR_VM_CR", "svm flag", "SVM Mode"},
	}, {
		// nested-guest-host-nested0
		name: "kvm guest whose host has nested off", ready: readyFacts,
		mutate: func(f *facts.Facts) {
			f.CPU = facts.CPU{Vendor: "intel", VendorID: "GenuineIntel", Flags: []string{"hypervisor"}}
			f.Virt = facts.Virt{Guest: ptr(true), Hypervisor: "kvm"}
			delete(f.Devices.Nodes, "dev/kvm")
			f.Devices.KVM = &facts.KVMProbe{Errno: "ENOENT"}
		},
		platform: "kubeadm-qemu-none", blocker: "virt.hardware",
		want: []string{"KVM host", "kvm_intel.nested=1", "host-passthrough"},
	}, {
		name: "kernel built without vhost-vsock", ready: readyFacts,
		mutate: func(f *facts.Facts) {
			delete(f.Devices.Nodes, "dev/vhost-vsock")
			f.Kernel.Config["VHOST_VSOCK"] = "n"
		},
		platform: "kubeadm-qemu-none", blocker: "devices.vhost-vsock",
		want: []string{"built without CONFIG_VHOST_VSOCK", "modprobe cannot help", "CONFIG_VHOST_VSOCK=m"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.ready()
			tt.mutate(f)
			v := evalOne(t, f, tt.platform)
			if v.BlockedBy != tt.blocker {
				t.Fatalf("blocked by %q, want %s", v.BlockedBy, tt.blocker)
			}
			fd := findingOf(t, v, tt.blocker)
			text := fd.Message + "\n" + fd.Remedy
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s: %q lacks %q", tt.blocker, text, w)
				}
			}
			for id, names := range tt.unknown {
				if fd := findingOf(t, v, id); fd.Raw != check.Unknown || !strings.Contains(fd.Message, names) {
					t.Errorf("%s: %s %q, want unknown naming %s", id, fd.Raw, fd.Message, names)
				}
			}
		})
	}
}

// TestCmdlineModuleTypos: a parameter of a module name one letter away
// from a KVM or VFIO module is a typo; real modules are not.
func TestCmdlineModuleTypos(t *testing.T) {
	for _, tc := range []struct {
		cmdline, want string
	}{
		{"ro kvm_inte.tdx=1", "kvm_inte.tdx=1 (did you mean kvm_intel.tdx?)"},
		{"ro kvm-amd.sev_snp=1", ""},
		{"ro kvm_amdd.sev_snp=1", "kvm_amdd.sev_snp=1 (did you mean kvm_amd.sev_snp?)"},
		{"ro kvm_pvm.enable=1 kvm_intel.tdx=1 vfio_pci.ids=10de:2331", ""},
		{"ro kvm.sev_es=1", "kvm.sev_es=1 (did you mean kvm_amd.sev_es?)"},
	} {
		got := strings.Join(cmdlineTypos(tc.cmdline), ", ")
		if got != tc.want {
			t.Errorf("cmdlineTypos(%q) = %q, want %q", tc.cmdline, got, tc.want)
		}
	}
}

// TestDiagnosisOrder: the checks that name a cause come before the checks
// that would only see its symptom, so that the cause is the first blocker.
func TestDiagnosisOrder(t *testing.T) {
	pos := map[string]int{}
	for i, c := range All() {
		pos[c.ID] = i
	}
	for _, tc := range [][3]string{
		{"snp.iommu", "snp.kvm.params", "the kernel turns SNP off without the IOMMU; kvm_amd.sev_snp=N follows"},
		{"virt.hardware", "kvm.module", "a firmware-locked VT-x/AMD-V makes kvm_amd/kvm_intel refuse to load"},
		{"kvm.module", "tdx.module", "a failed TDX module with kvm_intel.tdx=1 leaves no kvm_intel at all"},
		{"iommu.enabled", "gpu.vfio", "vfio-pci binds only devices in an IOMMU group"},
	} {
		a, aok := pos[tc[0]]
		b, bok := pos[tc[1]]
		if !aok || !bok || a > b {
			t.Errorf("%s must come before %s (%s)", tc[0], tc[1], tc[2])
		}
	}
}
