package catalog

import (
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// guestName describes the hypervisor under this host for messages.
func guestName(f *facts.Facts) string {
	switch h := f.Virt.Hypervisor; h {
	case "", "unknown":
		return "virtual machine"
	case "firecracker":
		return "Firecracker guest"
	case "cloud-hypervisor":
		return "Cloud Hypervisor guest"
	case "microsoft":
		return "Hyper-V/Azure guest"
	case "amazon":
		return "Amazon EC2 instance (not .metal)"
	case "google":
		return "Google Compute Engine VM"
	default:
		return strings.ToUpper(h[:1]) + h[1:] + " guest"
	}
}

func hwVirtFlag(f *facts.Facts) (string, bool) {
	switch {
	case f.CPU.HasFlag("vmx"):
		return "vmx", true
	case f.CPU.HasFlag("svm"):
		return "svm", true
	}
	return "", false
}

func virtChecks() []check.Check {
	return []check.Check{{
		ID:        "virt.hardware",
		Title:     "for hardware virtualization",
		Why:       "Every Kata platform runs each pod in a KVM virtual machine, which needs Intel VT-x (vmx) or AMD-V (svm) exposed to this kernel.",
		Reads:     []string{"cpu.flags", "virt.guest"},
		Platforms: "all",
		Remedies: []string{
			"bare metal: enable Intel VT-x (\"Virtualization Technology\") or AMD-V (\"SVM Mode\") in the BIOS/UEFI setup",
			"in a VM: run on bare metal, or enable nested virtualisation on the host that runs this VM (kvm_intel.nested=1 / kvm_amd.nested=1, or the cloud's nested-virtualisation instance type)",
		},
		Applies: onNode(check.Always(check.Blocking)),
		Run: func(f *facts.Facts) check.Result {
			ev := []check.Evidence{check.Ev("cpu.flags", hwFlagsSeen(f)), check.Ev("virt.guest", f.Virt.Guest)}
			if flag, ok := hwVirtFlag(f); ok {
				return check.Ok("cpu flag "+flag+" present", ev...)
			}
			if k := f.Devices.KVM; k != nil && k.CreateVM {
				// KVM without VT-x/AMD-V is a software backend such as PVM
				// (kvm_pvm, "Pagetable-based Virtual Machine", the RFC series
				// posted to the KVM list in 2024): it runs only guest kernels
				// built as PVM guests, which Kata's guest kernels are not, so
				// a pod VM cannot boot even though KVM_CREATE_VM succeeds.
				backend := "a software backend"
				if m, ok := f.Kernel.Modules["kvm_pvm"]; ok && m.Present() {
					backend = "kvm_pvm (PVM)"
					ev = append(ev, check.Ev("kernel.modules.kvm_pvm", "present"))
				}
				return check.Failed("this is a "+guestName(f)+" without vmx/svm: /dev/kvm is provided by "+backend+", which boots only guest kernels built for it; Kata's guest kernels are not, so no VM-based platform can run here",
					"run on bare metal, or in a VM with nested virtualisation (vmx/svm exposed to the guest)", append(ev, check.Ev("devices.kvm.createVm", true))...)
			}
			if yes(f.Virt.Guest) {
				if h := f.Virt.Hypervisor; h == "kvm" || h == "qemu" {
					// A KVM host passes vmx/svm to its guests only when its
					// own kvm_intel/kvm_amd has nested on and the guest's
					// CPU model includes the flag: the fix is on that host,
					// not on this one.
					return check.Failed("this is a "+guestName(f)+" and its KVM host does not pass vmx/svm through: nested virtualisation is off on that host (kvm_intel.nested / kvm_amd.nested = 0) or the VM's CPU model hides the flag, so no VM-based platform can run here",
						"on the KVM host that runs this VM: set kvm_intel.nested=1 (or kvm_amd.nested=1), reload the module, and give the VM the host CPU model (-cpu host, libvirt host-passthrough); then restart the VM", ev...)
				}
				return check.Failed("this is a "+guestName(f)+" without nested virtualisation: no vmx/svm cpu flag, so no VM-based platform can run here",
					"run on bare metal, or in a VM with nested virtualisation enabled (on the host that runs it: kvm_intel.nested=1 or kvm_amd.nested=1, or an instance type that offers nested virtualisation)", ev...)
			}
			if l := biosVirtOffLine(f); l != "" {
				flag := "vmx"
				if strings.Contains(strings.ToLower(l), "svm") {
					flag = "svm"
				}
				return check.Failed("the firmware locked hardware virtualisation off: the kernel says \""+l+"\" and cleared the "+flag+" flag, so KVM cannot load and /dev/kvm is missing",
					"enable Intel VT-x (\"Virtualization Technology\") or AMD-V (\"SVM Mode\") in the BIOS/UEFI setup and reboot (a cold boot: the lock is set at power-on)", append(ev, check.Ev("kernel.bootLog", l))...)
			}
			return check.Failed("no vmx or svm cpu flag: hardware virtualisation is missing or disabled in the BIOS",
				"enable Intel VT-x (\"Virtualization Technology\") or AMD-V (\"SVM Mode\") in the BIOS/UEFI setup and reboot", ev...)
		},
	}, {
		ID:        "virt.nested",
		Title:     "if this host is a virtual machine",
		Why:       "Pods in nested VMs run noticeably slower and some devices behave differently; it works for testing but is rarely what production wants.",
		Parent:    "virt.hardware",
		Reads:     []string{"virt.guest"},
		Platforms: "non-confidential platforms (warning)",
		Remedies:  []string{"prefer bare-metal nodes for production sandboxes"},
		Applies:   onNode(check.When(check.Warning, func(p platform.Platform) bool { return !p.Confidential() })),
		Run: func(f *facts.Facts) check.Result {
			ev := []check.Evidence{check.Ev("virt.guest", f.Virt.Guest), check.Ev("virt.hypervisor", f.Virt.Hypervisor)}
			if yes(f.Virt.Guest) {
				return check.Warned("running nested in a "+guestName(f)+": sandboxes work but are slower",
					"prefer bare metal for production", ev...)
			}
			return check.Ok("bare metal", ev...)
		},
	}, {
		ID:        "virt.guest.tee",
		Title:     "for bare metal (TEEs are not nested)",
		Why:       "AMD SEV-SNP and Intel TDX need the host's firmware and the CPU's memory encryption directly: a hypervisor cannot pass them through to a nested guest.",
		Parent:    "virt.hardware",
		Reads:     []string{"virt.guest"},
		Platforms: "confidential platforms (snp, tdx)",
		Remedies:  []string{"run confidential platforms on bare-metal hosts (or cloud bare-metal instances such as EC2 .metal)"},
		Applies:   onKVMHost(check.When(check.Blocking, isConfidential)),
		Run: func(f *facts.Facts) check.Result {
			ev := []check.Evidence{check.Ev("virt.guest", f.Virt.Guest), check.Ev("virt.hypervisor", f.Virt.Hypervisor)}
			if yes(f.Virt.Guest) {
				return check.Failed("this is a "+guestName(f)+": SEV-SNP and TDX need bare metal",
					"run confidential platforms on a bare-metal host", ev...)
			}
			if f.Virt.Guest == nil {
				return check.Unsure("whether this host is a VM is not known", ev...)
			}
			return check.Ok("bare metal", ev...)
		},
	}}
}

// biosVirtOffLine returns the boot-log line in which the kernel says the
// firmware disabled VT-x or AMD-V: arch/x86/kernel/cpu/amd.c (init_amd)
// prints "SVM disabled (by BIOS) in MSR_VM_CR" and clears the svm flag when
// VM_CR.SVMDIS is set; arch/x86/kernel/cpu/feat_ctl.c prints "VMX (outside
// TXT) disabled by BIOS" and clears vmx when IA32_FEAT_CTL is locked
// without VMX; kvm_amd/kvm_intel repeat it when they refuse to load.
func biosVirtOffLine(f *facts.Facts) string {
	for _, l := range f.Kernel.BootLog {
		low := strings.ToLower(l)
		if (strings.Contains(low, "svm") || strings.Contains(low, "vmx")) &&
			(strings.Contains(low, "disabled (by bios)") || strings.Contains(low, "disabled by bios") || strings.Contains(low, "not enabled (by bios)")) {
			return l
		}
	}
	return ""
}

// hwFlagsSeen lists the virtualisation-related flags present, for evidence.
func hwFlagsSeen(f *facts.Facts) []string {
	var out []string
	for _, fl := range []string{"vmx", "svm", "hypervisor"} {
		if f.CPU.HasFlag(fl) {
			out = append(out, fl)
		}
	}
	return out
}
