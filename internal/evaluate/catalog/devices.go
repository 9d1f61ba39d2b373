package catalog

import (
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// devCheck builds a check that a device node exists, or that the module
// (or kernel option) that creates it on first open is there.
func devCheck(id, dev, mod, config, title, why, remedy string, sev check.Severity, platforms string, applies func(p platform.Platform) bool) check.Check {
	return check.Check{
		ID: id, Title: title, Why: why, Parent: "kvm.device.exists",
		Reads:     []string{"devices.nodes." + dev},
		Platforms: platforms, Remedies: []string{remedy},
		Applies: check.When(sev, applies),
		Run: func(f *facts.Facts) check.Result {
			_, ok := node(f, dev)
			m := module(f, mod)
			ev := []check.Evidence{check.Ev("devices.nodes."+dev+".exists", ok), check.Ev("kernel.modules."+mod, present(m))}
			switch {
			case ok:
				return check.Ok("/"+dev+" present", ev...)
			case f.Kernel.Config[config] == "n":
				// The config says the kernel has no such module at all, so
				// the module list cannot change the answer, and "modprobe"
				// is the wrong remedy for the missing node.
				ev = append(ev, check.Ev("kernel.config."+config, "n"))
				return check.Failed("/"+dev+" is missing because the running kernel is built without CONFIG_"+config+": "+mod+" does not exist, so modprobe cannot help",
					"boot a kernel built with CONFIG_"+config+"=m (distribution generic kernels have it), or rebuild this one with it", ev...)
			case m.Present():
				return check.Ok(mod+" "+present(m)+" (the node is created on first use)", ev...)
			case configSet(f, config):
				ev = append(ev, check.Ev("kernel.config."+config, f.Kernel.Config[config]))
				return check.Ok("CONFIG_"+config+"="+f.Kernel.Config[config]+": the module loads on first open", ev...)
			}
			// Absent node, module and option: a failure only when the
			// module list and the kernel config could be read.
			if u, ok := unknownOf(f, "kernel.modules."+mod, "kernel.config."+config); ok {
				return check.Unsure("/"+dev+" is missing and whether "+mod+" can load is not known", append(ev, u)...)
			}
			return check.Failed("/"+dev+" is missing and "+mod+" is not loaded", remedy, ev...)
		},
	}
}

func deviceChecks() []check.Check {
	return nodeArea([]check.Check{
		devCheck("devices.vhost-vsock", "dev/vhost-vsock", "vhost_vsock", "VHOST_VSOCK",
			"if device /dev/vhost-vsock exists",
			"The Kata agent in the guest talks to the shim over vsock; QEMU uses the host's vhost-vsock for it.",
			"modprobe vhost_vsock (and add it to /etc/modules-load.d/)", check.Blocking, "qemu platforms", usesVhost),
		devCheck("devices.vhost-net", "dev/vhost-net", "vhost_net", "VHOST_NET",
			"if device /dev/vhost-net exists",
			"vhost-net moves virtio-net into the kernel; without it pod networking works but is slower.",
			"modprobe vhost_net to improve the performance of virtio networking", check.Warning, "qemu platforms (warning)", usesVhost),
		devCheck("devices.tun", "dev/net/tun", "tun", "TUN",
			"if device /dev/net/tun exists",
			"Kata connects the pod network to the VM through a tap device, which needs /dev/net/tun.",
			"modprobe tun to enable networking for sandbox VMs", check.Blocking, "all", anyPlatform),
	})
}
