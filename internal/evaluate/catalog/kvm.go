package catalog

import (
	"fmt"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

// vendorModule is kvm_intel or kvm_amd for the CPU vendor.
func vendorModule(f *facts.Facts) string {
	switch {
	case f.CPU.Vendor == "amd" || f.CPU.HasFlag("svm"):
		return "kvm_amd"
	case f.CPU.Vendor == "intel" || f.CPU.HasFlag("vmx"):
		return "kvm_intel"
	}
	return ""
}

func kvmChecks() []check.Check {
	return kvmHostArea([]check.Check{{
		ID:        "kvm.module",
		Title:     "for the KVM kernel modules",
		Why:       "KVM is the kernel half of every hypervisor berth installs; kvm plus kvm_intel or kvm_amd must be loaded or built in.",
		Parent:    "virt.hardware",
		Reads:     []string{"kernel.modules", "cpu.vendor", "cpu.flags", "kernel.cmdline", "tee.tdx.moduleError"},
		Platforms: "all",
		Remedies:  []string{"modprobe kvm_intel (Intel) or modprobe kvm_amd (AMD); make it permanent in /etc/modules-load.d/kvm.conf", "if modprobe fails, check dmesg: \"disabled by bios\" means VT-x/AMD-V is off in the firmware", "with kvm_intel.tdx=1 a failed TDX module makes kvm_intel fail to load: fix TDX (tdx.module) or drop kvm_intel.tdx=1"},
		Applies:   check.Always(check.Blocking),
		Run: func(f *facts.Facts) check.Result {
			vm := vendorModule(f)
			kvm, v := module(f, "kvm"), module(f, vm)
			ev := []check.Evidence{check.Ev("kernel.modules.kvm", present(kvm)), check.Ev("kernel.modules."+vm, present(v))}
			switch {
			case vm == "":
				return check.Unsure("CPU vendor unknown: cannot tell which KVM module applies", ev...)
			case !v.Present() && vm == "kvm_intel" && f.TEE.TDX.ModuleError != "" && cmdlineOn(f.Kernel.Cmdline, "kvm_intel.tdx"):
				// Since Linux 6.16 kvm_intel.tdx=1 makes kvm_intel bring
				// up the TDX module while it loads, and a failure other
				// than "module not loaded" fails the whole module
				// (arch/x86/kvm/vmx/tdx.c, tdx_bringup): /dev/kvm is then
				// missing for every VM, not only for TDX guests.
				return check.Failed(fmt.Sprintf("kvm_intel did not load: it was asked to bring up TDX (%s) and the TDX module failed (\"%s\"), which makes kvm_intel fail as a whole, so /dev/kvm is missing", cmdlineParam(f.Kernel.Cmdline, "kvm_intel.tdx"), f.TEE.TDX.ModuleError),
					"fix the TDX module failure (see tdx.module), or remove kvm_intel.tdx=1 from the kernel command line to run plain VMs, and reboot", append(ev, check.Ev("tee.tdx.moduleError", f.TEE.TDX.ModuleError), check.Ev("kernel.cmdline", cmdlineParam(f.Kernel.Cmdline, "kvm_intel.tdx")))...)
			case !kvm.Present() || !v.Present():
				return check.Failed(fmt.Sprintf("KVM modules not loaded (kvm: %s, %s: %s)", present(kvm), vm, present(v)),
					"modprobe "+vm+" (and add it to /etc/modules-load.d/kvm.conf); if it fails, look for \"disabled by bios\" in dmesg", ev...)
			}
			return check.Ok("kvm and "+vm+" "+present(v), ev...)
		},
	}, {
		ID:        "kvm.device.exists",
		Title:     "if device /dev/kvm exists",
		Why:       "Hypervisors open /dev/kvm to create VMs; without it Kata fails at pod start with \"No such file or directory\".",
		Parent:    "virt.hardware",
		Reads:     []string{"devices.nodes.dev/kvm"},
		Platforms: "all",
		Remedies:  []string{"load the KVM modules (modprobe kvm_intel or kvm_amd); in a container, pass --device /dev/kvm"},
		Applies:   check.Always(check.Blocking),
		Run: func(f *facts.Facts) check.Result {
			n, ok := node(f, "dev/kvm")
			ev := []check.Evidence{check.Ev("devices.nodes.dev/kvm.exists", ok)}
			if !ok {
				return check.Failed("/dev/kvm does not exist", "load the KVM modules: modprobe "+orDefault(vendorModule(f), "kvm_intel or kvm_amd")+"; in a container, pass --device /dev/kvm", ev...)
			}
			return check.Ok("present "+n.Mode, ev...)
		},
	}, {
		ID:        "kvm.device.accessible",
		Title:     "if device /dev/kvm is accessible",
		Why:       "The Kata shim runs as root, but berth and the hypervisor must be able to open /dev/kvm read-write.",
		Parent:    "kvm.device.exists",
		Reads:     []string{"devices.nodes.dev/kvm"},
		Platforms: "all",
		Remedies:  []string{"run berth as root, or add the user to the group that owns /dev/kvm (usually kvm)", "check the udev rule that sets /dev/kvm to 0660 root:kvm"},
		Applies:   check.Always(check.Blocking),
		Run: func(f *facts.Facts) check.Result {
			n, _ := node(f, "dev/kvm")
			ev := []check.Evidence{check.Ev("devices.nodes.dev/kvm.accessible", n.Accessible), check.Ev("devices.nodes.dev/kvm.mode", n.Mode)}
			switch {
			case n.Accessible == nil:
				return check.Unsure("not probed (only on a live root)", ev...)
			case !*n.Accessible:
				return check.Failed("/dev/kvm cannot be opened read-write by this user", "run as root or add the user to the "+orDefault(n.Group, "kvm")+" group", ev...)
			}
			return check.Ok("opened read-write", ev...)
		},
	}, {
		ID:        "kvm.device.free",
		Title:     "if another hypervisor holds VT-x/AMD-V",
		Why:       "VirtualBox, VMware and similar hypervisors take the virtualisation extensions exclusively; KVM then fails to create VMs with EBUSY.",
		Parent:    "kvm.device.accessible",
		Reads:     []string{"devices.kvm"},
		Platforms: "all",
		Remedies:  []string{"stop the other hypervisor (VirtualBox: vboxdrv; VMware: vmmon) or unload its kernel module"},
		Applies:   check.Always(check.Blocking),
		Run: func(f *facts.Facts) check.Result {
			k := f.Devices.KVM
			if k == nil {
				return check.Unsure("KVM was not probed (offline root)", check.Ev("devices.kvm", "not probed"))
			}
			ev := []check.Evidence{check.Ev("devices.kvm.errno", k.Errno)}
			if k.Errno == "EBUSY" {
				return check.Failed("another hypervisor holds the virtualisation extensions (EBUSY)", "stop the other hypervisor (VirtualBox: vboxdrv; VMware: vmmon) and retry", ev...)
			}
			return check.Ok("not held by another hypervisor", ev...)
		},
	}, {
		ID:        "kvm.device.usable",
		Title:     "if KVM can create a VM",
		Why:       "Opening /dev/kvm is not enough: KVM_GET_API_VERSION must return 12 and KVM_CREATE_VM must succeed, which is what a hypervisor does first.",
		Parent:    "kvm.device.free",
		Reads:     []string{"devices.kvm"},
		Platforms: "all",
		Remedies:  []string{"check dmesg for kvm errors", "make sure the KVM module matches the running kernel (reboot after a kernel update)"},
		Applies:   check.Always(check.Blocking),
		Run: func(f *facts.Facts) check.Result {
			k := f.Devices.KVM
			if k == nil {
				return check.Unsure("KVM was not probed (offline root)", check.Ev("devices.kvm", "not probed"))
			}
			ev := []check.Evidence{check.Ev("devices.kvm.apiVersion", k.APIVersion), check.Ev("devices.kvm.createVm", k.CreateVM)}
			switch {
			case !k.Opened:
				return check.Failed("opening /dev/kvm failed: "+orDefault(k.Error, k.Errno), "see dmesg for kvm errors", ev...)
			case k.APIVersion != 12:
				return check.Failed(fmt.Sprintf("KVM API version %d, expected 12", k.APIVersion), "upgrade the kernel", ev...)
			case !k.CreateVM:
				return check.Failed("KVM_CREATE_VM failed: "+orDefault(k.Error, k.Errno), "check dmesg for kvm errors; reboot after a kernel update", ev...)
			}
			return check.Ok("API 12, created a VM", ev...)
		},
	}})
}

func present(m facts.Module) string {
	switch {
	case m.Builtin:
		return "built in"
	case m.Loaded:
		return "loaded"
	}
	return "not loaded"
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// cmdlineParam returns the last "key=value" parameter of a kernel command
// line whose key is key ('-' and '_' alike, as the kernel treats them), or
// "" when the command line does not set it.
func cmdlineParam(cmdline, key string) string {
	norm := func(k string) string { return strings.ReplaceAll(k, "-", "_") }
	var last string
	for _, tok := range strings.Fields(cmdline) {
		k, _, _ := strings.Cut(tok, "=")
		if norm(k) == norm(key) {
			last = tok
		}
	}
	return last
}

// cmdlineOn reports whether the command line sets key to a true value
// (1, Y, y, on), as the kernel's bool parameter parser reads it.
func cmdlineOn(cmdline, key string) bool {
	_, v, ok := strings.Cut(cmdlineParam(cmdline, key), "=")
	switch v {
	case "1", "Y", "y", "on":
		return ok
	}
	return false
}
