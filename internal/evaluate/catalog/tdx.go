package catalog

import (
	"fmt"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

const tdxBIOSRemedy = "in the BIOS enable Memory Encryption (TME), Total Memory Encryption Multi-Tenant (TME-MT), TDX, the SEAM loader and a TME-MT/TDX key split > 0"

func tdxChecks() []check.Check {
	// The CPU generation is the node's; the rest is the host side of TDX
	// on KVM.
	tdxCPU := onNode(check.When(check.Blocking, isTDX))
	tdx := onKVMHost(check.When(check.Blocking, isTDX))
	return []check.Check{{
		ID:        "tdx.cpu.generation",
		Title:     "for a TDX capable Intel Xeon",
		Why:       "Intel TDX exists on 4th-generation Xeon Scalable (Sapphire Rapids, some SKUs) and newer.",
		Parent:    "virt.guest.tee",
		Reads:     []string{"cpu.vendor", "cpu.productLine"},
		Platforms: "tdx platforms",
		Remedies:  []string{"use an Intel Xeon Emerald Rapids, Granite Rapids or a TDX-enabled Sapphire Rapids SKU"},
		Applies:   tdxCPU,
		Run: func(f *facts.Facts) check.Result {
			ev := []check.Evidence{check.Ev("cpu.vendor", f.CPU.Vendor), check.Ev("cpu.productLine", f.CPU.ProductLine)}
			switch {
			case f.CPU.Vendor != "intel":
				return check.Failed("not an Intel CPU ("+orDefault(f.CPU.VendorID, f.CPU.Vendor)+"): TDX needs Intel Xeon", "use an Intel Xeon with TDX, or an SNP platform on AMD", ev...)
			case f.CPU.ProductLine == "sapphire-rapids":
				return check.Warned("Sapphire Rapids: only some SKUs have TDX", "check the SKU on Intel's product pages; Emerald Rapids and newer have TDX", ev...)
			case f.CPU.ProductLine == "emerald-rapids" || f.CPU.ProductLine == "granite-rapids" || f.CPU.ProductLine == "sierra-forest":
				return check.Ok("Xeon "+f.CPU.ProductLine, ev...)
			}
			return check.Failed("CPU "+orDefault(f.CPU.ProductLine, orDefault(f.CPU.ModelName, "unknown model"))+" has no TDX", "use an Intel Xeon Emerald Rapids or newer", ev...)
		},
	}, {
		ID:        "tdx.kernel.version",
		Title:     "for a host kernel with TDX support",
		Why:       "Only a kernel with TDX host support (upstream Linux 6.16, or a vendor TDX kernel such as canonical/tdx) initialises TDX and reports the BIOS KeyIDs; without it the BIOS state cannot be seen at all, so this comes before every BIOS and module check.",
		Parent:    "tdx.cpu.generation",
		Reads:     []string{"kernel.release"},
		Platforms: "tdx platforms",
		Remedies:  []string{"install a kernel >= 6.16 or your vendor's TDX host kernel (e.g. canonical/tdx)"},
		Applies:   tdx,
		Run:       tdxKernel,
	}, {
		ID:        "tdx.bios.keyids",
		Title:     "if TDX is enabled in the BIOS",
		Why:       "The BIOS reserves private KeyIDs for TDX; the kernel logs \"BIOS enabled: private KeyID range\" only when TDX is on.",
		Parent:    "tdx.kernel.version",
		Reads:     []string{"tee.tdx.biosKeyIds"},
		Platforms: "tdx platforms",
		Remedies:  []string{tdxBIOSRemedy},
		Applies:   tdx,
		Run: func(f *facts.Facts) check.Result {
			r := f.TEE.TDX.BIOSKeyIDs
			if r == nil && tdxHostSupport(f) != hostSupportYes {
				return check.Unsure("cannot tell: only a kernel with TDX host support reports the BIOS KeyIDs, and this kernel's support is not established (see tdx.kernel.version)", check.Ev("tee.tdx.biosKeyIds", "not reported"), check.Ev("kernel.release", f.Kernel.Release))
			}
			if r == nil {
				return check.Failed("the kernel reports no TDX private KeyIDs: TDX is off in the BIOS", tdxBIOSRemedy, check.Ev("tee.tdx.biosKeyIds", "none"))
			}
			return check.Ok(fmt.Sprintf("private KeyIDs [%d, %d)", r.Min, r.Max), check.Ev("tee.tdx.biosKeyIds", fmt.Sprintf("%d-%d", r.Min, r.Max)))
		},
	}, {
		ID:        "tdx.hibernation",
		Title:     "if hibernation is off",
		Why:       "The TDX module refuses to initialise while the kernel supports hibernation, because TDX memory cannot be saved to disk.",
		Parent:    "tdx.bios.keyids",
		Reads:     []string{"kernel.cmdline", "tee.tdx.moduleError"},
		Platforms: "tdx platforms",
		Remedies:  []string{"add nohibernate to the kernel command line and reboot"},
		Applies:   tdx,
		Run: func(f *facts.Facts) check.Result {
			ev := []check.Evidence{check.Ev("tee.tdx.moduleError", f.TEE.TDX.ModuleError)}
			if strings.Contains(strings.ToLower(f.TEE.TDX.ModuleError), "hibernation") {
				return check.Failed("TDX module: "+f.TEE.TDX.ModuleError, "add nohibernate to the kernel command line and reboot", ev...)
			}
			if strings.Contains(" "+f.Kernel.Cmdline+" ", " nohibernate ") {
				return check.Ok("nohibernate given", ev...)
			}
			return check.Ok("hibernation did not stop the TDX module", ev...)
		},
	}, {
		ID:        "tdx.module",
		Title:     "if the TDX module is initialised",
		Why:       "The TDX module (SEAM firmware) runs the trust domains; the kernel initialises it at boot and logs why when it cannot.",
		Parent:    "tdx.hibernation",
		Reads:     []string{"tee.tdx.moduleInitialized"},
		Platforms: "tdx platforms",
		Remedies:  []string{"install the TDX module (intel-seam firmware) or update the BIOS, which ships one", "boot a kernel with TDX host support (kvm_intel.tdx=1)"},
		Applies:   tdx,
		Run: func(f *facts.Facts) check.Result {
			t := f.TEE.TDX
			ev := []check.Evidence{check.Ev("tee.tdx.moduleInitialized", t.ModuleInitialized), check.Ev("tee.tdx.moduleVersion", t.ModuleVersion)}
			switch {
			case t.ModuleInitialized == nil && no(t.KVMTDX):
				// KVM brings the module up while kvm_intel loads with
				// tdx=1 (arch/x86/kvm/vmx/tdx.c, tdx_bringup); with tdx
				// off nobody tried, so silence here is no evidence.
				return check.Unsure("not attempted: the kernel initialises the TDX module only when kvm_intel loads with tdx=1, and kvm_intel.tdx is off (see tdx.kvm.param)", append(ev, check.Ev("tee.tdx.kvmTdx", t.KVMTDX))...)
			case t.ModuleInitialized == nil:
				return check.Unsure("the boot log does not say whether the TDX module initialised", ev...)
			case !*t.ModuleInitialized:
				why := orDefault(t.ModuleError, "initialisation failed")
				msg, remedy := "TDX module: "+why, "update the BIOS (it carries the TDX module) or install a newer module in /lib/firmware/intel-seam"
				switch {
				case strings.Contains(why, "(-12)"):
					// -ENOMEM: the kernel could not allocate the PAMTs,
					// the module's page metadata (about 1/256 of the
					// memory TDX covers, in physically contiguous chunks
					// per TD memory region; arch/x86/virt/vmx/tdx/tdx.c,
					// tdmr_set_up_pamt). Nothing is wrong with the module.
					msg = "TDX module: " + why + ": out of memory while allocating the PAMT (the module's page metadata, about 1/256 of the memory TDX covers, in physically contiguous blocks); the module itself is fine"
					remedy = "leave the PAMT enough free contiguous memory at the time kvm_intel loads: reduce boot-time hugepage reservations (hugepages=, hugepagesz=1G), mem=/memmap= carve-outs or crashkernel= size, or reserve hugepages after boot; then reboot"
				case strings.Contains(why, "not loaded"):
					msg = "TDX module: " + why + ": the BIOS's SEAM loader did not load a TDX module, so TDX is on but has no module to run"
					remedy = "enable \"TDX Secure Arbitration Mode Loader (SEAM Loader)\" in the BIOS and update the BIOS to one that carries a TDX module (or install intel-seam firmware where the BIOS loads it from the ESP)"
				}
				return check.Failed(msg, remedy, ev...)
			}
			return check.Ok("initialised "+t.ModuleVersion, ev...)
		},
	}, {
		ID:        "tdx.kvm.param",
		Title:     "if kvm_intel enables tdx",
		Why:       "KVM creates trust domains only when kvm_intel was loaded with tdx=Y.",
		Parent:    "tdx.module",
		Reads:     []string{"tee.tdx.kvmTdx", "kernel.cmdline", "kernel.modules"},
		Platforms: "tdx platforms",
		Remedies:  []string{"add kvm_intel.tdx=1 to the kernel command line (or options kvm_intel tdx=1 in /etc/modprobe.d/) and reboot", "keep kvm.enable_virt_at_load=1 (the default): KVM turns TDX off without it"},
		Applies:   tdx,
		Run: func(f *facts.Facts) check.Result {
			v := f.TEE.TDX.KVMTDX
			ev := check.Ev("tee.tdx.kvmTdx", v)
			switch {
			case v == nil:
				return check.Failed("kvm_intel has no tdx parameter: this kernel's KVM lacks TDX support or kvm_intel is not loaded", "boot a kernel with KVM TDX support and add kvm_intel.tdx=1", ev)
			case *v:
				return check.Ok("kvm_intel.tdx=Y", ev)
			}
			given := cmdlineOn(f.Kernel.Cmdline, "kvm_intel.tdx")
			atLoad, known := module(f, "kvm").Params["enable_virt_at_load"]
			if given && known && paramFalse(atLoad) {
				// tdx_bringup (arch/x86/kvm/vmx/tdx.c) refuses TDX when
				// KVM does not enable virtualisation at load and logs
				// "tdx: tdx requires kvm.enable_virt_at_load=1".
				return check.Failed("kvm_intel.tdx=1 is given but kvm.enable_virt_at_load is off, and KVM turns TDX off without it (\"tdx requires kvm.enable_virt_at_load=1\")",
					"remove kvm.enable_virt_at_load=0 from the kernel command line or /etc/modprobe.d (often set to share VT-x with VirtualBox or VMware) and reboot", ev, check.Ev("kernel.modules.kvm.enable_virt_at_load", atLoad))
			}
			if !given {
				msg := "kvm_intel.tdx is off: the kernel command line does not set kvm_intel.tdx=1"
				if typos := cmdlineTypos(f.Kernel.Cmdline); len(typos) > 0 {
					msg += "; it has " + strings.Join(typos, ", ")
				}
				return check.Failed(msg, "add kvm_intel.tdx=1 to GRUB_CMDLINE_LINUX (spelled exactly so), run update-grub and reboot", ev, check.Ev("kernel.cmdline", f.Kernel.Cmdline))
			}
			return check.Failed("kvm_intel.tdx is off although the command line sets it: kvm_intel turned TDX off (see the kvm_intel lines of the boot log)", "check dmesg for kvm_intel \"tdx\" messages", ev, check.Ev("kernel.cmdline", f.Kernel.Cmdline))
		},
	}, {
		ID:        "tdx.keys",
		Title:     "for TDX keys (misc cgroup)",
		Why:       "Each trust domain takes one private KeyID; the kernel publishes how many in the misc cgroup's tdx capacity.",
		Parent:    "tdx.module",
		Reads:     []string{"cgroups.miscCapacity"},
		Platforms: "tdx platforms",
		Remedies:  []string{"raise the TME-MT/TDX key split in the BIOS"},
		Applies:   tdx,
		Run: func(f *facts.Facts) check.Result {
			n, ok := f.Cgroups.MiscCapacity["tdx"]
			ev := check.Ev("cgroups.miscCapacity.tdx", n)
			switch {
			case !ok:
				return check.Unsure("misc cgroup reports no tdx capacity (cgroup v1 or an older kernel)", ev)
			case n <= 0:
				return check.Failed("no TDX keys available", "raise the TME-MT/TDX key split in the BIOS", ev)
			}
			return check.Ok(fmt.Sprintf("%d TDX keys", n), ev)
		},
	}, {
		ID:        "tdx.sgx",
		Title:     "for SGX (TDX attestation)",
		Why:       "TDX quotes are signed by an SGX quoting enclave on the host; without SGX guests run but cannot be attested remotely.",
		Parent:    "tdx.cpu.generation",
		Reads:     []string{"tee.sgx"},
		Platforms: "tdx platforms (warning)",
		Remedies:  []string{"enable SGX in the BIOS (with a PRMRR size), then install the Intel SGX DCAP quote generation service and register the platform"},
		Applies:   onKVMHost(check.When(check.Warning, isTDX)),
		Run: func(f *facts.Facts) check.Result {
			s := f.TEE.SGX
			ev := []check.Evidence{check.Ev("tee.sgx.enclave", s.Enclave), check.Ev("tee.sgx.provision", s.Provision)}
			if !s.Enclave || !s.Provision {
				return check.Failed("/dev/sgx_enclave or /dev/sgx_provision missing: TDX guests cannot get attestation quotes", "enable SGX in the BIOS and install the SGX DCAP quote generation service", ev...)
			}
			return check.Ok("SGX enclave and provision devices present", ev...)
		},
	}}
}

// hostSupport is what the facts say about a kernel's host support for a TEE.
type hostSupport uint8

const (
	// hostSupportUnknown: nothing shows it either way.
	hostSupportUnknown hostSupport = iota
	// hostSupportNo: the kernel config or its version rules it out.
	hostSupportNo
	// hostSupportYes: the kernel has it (upstream version, config, module
	// parameter or its boot messages).
	hostSupportYes
)

// tdxHostSupport says whether the running kernel has TDX host support: a
// kernel without it prints no virt/tdx lines and kvm_intel has no tdx
// parameter, so it cannot show whether TDX is on in the BIOS.
func tdxHostSupport(f *facts.Facts) hostSupport {
	t := f.TEE.TDX
	cfg := f.Kernel.Config["INTEL_TDX_HOST"]
	switch {
	case cfg == "y" || t.KVMTDX != nil || t.BIOSKeyIDs != nil || t.ModuleInitialized != nil || t.ModuleError != "":
		return hostSupportYes
	}
	// No sign of support: the config or the version says no, unless a
	// sign could not be read (no boot log, no kernel config, kvm_intel
	// not loaded). A loaded kvm_intel without a tdx parameter has no
	// TDX, although discovery lists the parameter as unknown.
	if _, unk := unknownOf(f, "tee.tdx.biosKeyIds", "tee.tdx.moduleInitialized", "tee.tdx.moduleError"); unk {
		return hostSupportUnknown
	}
	if _, unk := unknownOf(f, "tee.tdx.kvmTdx"); unk && !module(f, "kvm_intel").Present() {
		return hostSupportUnknown
	}
	v, ok := parseVersion(f.Kernel.Release)
	_, noConfig := unknownOf(f, "kernel.config.INTEL_TDX_HOST")
	switch {
	case cfg == "n":
		return hostSupportNo
	case !ok || noConfig:
		return hostSupportUnknown
	case v.atLeast(6, 16):
		return hostSupportYes
	}
	return hostSupportNo
}

// tdxKernel is tdx.kernel.version: upstream >= 6.16 passes, an older
// kernel with TDX host support is a vendor kernel (a warning), a kernel
// without it fails.
func tdxKernel(f *facts.Facts) check.Result {
	rel := f.Kernel.Release
	t := f.TEE.TDX
	ev := []check.Evidence{check.Ev("kernel.release", rel), check.Ev("kernel.config.INTEL_TDX_HOST", orDefault(f.Kernel.Config["INTEL_TDX_HOST"], "not reported")), check.Ev("tee.tdx.kvmTdx", t.KVMTDX)}
	v, ok := parseVersion(rel)
	switch tdxHostSupport(f) {
	case hostSupportUnknown:
		return check.Unsure("cannot tell whether kernel "+orDefault(rel, "(release not reported)")+" has TDX host support", ev...)
	case hostSupportNo:
		why := "kernel " + rel + " has no TDX host support"
		switch {
		case f.Kernel.Config["INTEL_TDX_HOST"] == "n":
			why += " (CONFIG_INTEL_TDX_HOST is not set)"
		case ok && !v.atLeast(6, 16):
			why += " (it predates upstream TDX host support, 6.16, and kvm_intel has no tdx parameter)"
		}
		return check.Failed(why+": it cannot initialise TDX or show whether TDX is on in the BIOS",
			"install a kernel >= 6.16 (HWE/backports) or your vendor's TDX host kernel (e.g. canonical/tdx), then check the BIOS", ev...)
	}
	if ok && v.atLeast(6, 16) {
		return check.Ok(rel+" >= 6.16", ev...)
	}
	return check.Warned(fmt.Sprintf("%s predates upstream TDX host support (6.16) but has it: a vendor TDX kernel", rel),
		"fine if your vendor supports it; upstream support needs >= 6.16", ev...)
}

// paramFalse reports whether a Y/N module parameter value is false.
func paramFalse(v string) bool {
	switch strings.TrimSpace(v) {
	case "N", "n", "0":
		return true
	}
	return false
}
