package catalog

import (
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

func sharedFSChecks() []check.Check {
	return nodeArea([]check.Check{{
		ID:        "sharedfs.virtiofs.kernel",
		Title:     "for virtio-fs/FUSE support in the kernel",
		Why:       "Platforms that share the container image with the guest run virtiofsd, a vhost-user FUSE server; a kernel built without FUSE and virtio-fs support usually lacks the rest of that stack too.",
		Reads:     []string{"kernel.config"},
		Platforms: "platforms with a shared filesystem (virtio-fs) (warning)",
		Remedies:  []string{"use a distribution kernel (they set CONFIG_FUSE_FS and CONFIG_VIRTIO_FS)"},
		Applies:   check.When(check.Warning, hasVirtioFS),
		Run: func(f *facts.Facts) check.Result {
			ev := []check.Evidence{check.Ev("kernel.config.VIRTIO_FS", f.Kernel.Config["VIRTIO_FS"]), check.Ev("kernel.config.FUSE_FS", f.Kernel.Config["FUSE_FS"])}
			switch {
			case len(f.Kernel.Config) == 0:
				return check.Unsure("kernel config not available", ev...)
			case configSet(f, "VIRTIO_FS") || configSet(f, "FUSE_FS"):
				return check.Ok("FUSE/virtio-fs configured", ev...)
			}
			return check.Failed("kernel built without FUSE and virtio-fs", "use a distribution kernel with CONFIG_FUSE_FS and CONFIG_VIRTIO_FS", ev...)
		},
	}, {
		ID:        "sharedfs.virtiofs.daemon",
		Title:     "for the virtiofsd binary",
		Why:       "virtiofsd serves the container's root filesystem to the guest on platforms that share it; berth install brings Kata's build when the host has none.",
		Reads:     []string{"binaries.virtiofsd.path"},
		Platforms: "platforms with a shared filesystem (virtio-fs) (warning: installed by berth install)",
		Remedies:  []string{"berth install installs Kata's static build, which includes virtiofsd", "or install the distribution package (virtiofsd)"},
		Applies:   check.When(check.Warning, hasVirtioFS),
		Run: func(f *facts.Facts) check.Result {
			b, ok := binary(f, "virtiofsd")
			if !ok {
				return check.Warned("virtiofsd is not installed yet", "berth install installs Kata's static build, which includes virtiofsd", check.Ev("binaries.virtiofsd", "absent"))
			}
			return check.Ok(b.Path+" "+b.Version, check.Ev("binaries.virtiofsd.path", b.Path))
		},
	}, {
		ID:        "sharedfs.9p",
		Title:     "for 9p support in the kernel",
		Why:       "Platforms that share files over virtio-9p need the host's 9p support in QEMU and the kernel's NET_9P.",
		Reads:     []string{"kernel.config"},
		Platforms: "platforms using virtio-9p (none of the current ones)",
		Remedies:  []string{"use a distribution kernel with CONFIG_NET_9P and CONFIG_9P_FS"},
		Applies:   check.When(check.Warning, func(p platform.Platform) bool { return p.SharedFS() == "virtio-9p" }),
		Run: func(f *facts.Facts) check.Result {
			ev := check.Ev("kernel.config.NET_9P", f.Kernel.Config["NET_9P"])
			if configSet(f, "NET_9P") {
				return check.Ok("NET_9P configured", ev)
			}
			return check.Failed("kernel built without 9p", "use a kernel with CONFIG_NET_9P", ev)
		},
	}})
}
