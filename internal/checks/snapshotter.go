package checks

import (
	"slices"

	"berth.dev/berth/internal/check"
	"berth.dev/berth/internal/facts"
	"berth.dev/berth/platform"
)

func snapshotterChecks() []check.Check {
	return []check.Check{{
		ID:        "snapshotter.available",
		Title:     "for the platform's snapshotter",
		Why:       "Guest-pull platforms need the nydus snapshotter; Firecracker has no shared filesystem and needs a block-device snapshotter (devmapper or blockfile); GPU platforms use erofs.",
		Parent:    "runtime.present",
		Reads:     []string{"runtimes.containerd.snapshotters"},
		Platforms: "containerd platforms with a snapshotter other than overlayfs",
		Remedies: []string{
			"nydus: berth install deploys nydus-snapshotter",
			"devmapper: create a thin pool and configure [plugins.\"io.containerd.snapshotter.v1.devmapper\"] pool_name, root_path, base_image_size",
			"blockfile: configure [plugins.\"io.containerd.snapshotter.v1.blockfile\"] scratch_file and root_path",
			"erofs: containerd >= 2.1 with the erofs snapshotter and CONFIG_EROFS_FS",
		},
		Applies: check.When(check.Blocking, func(p platform.Platform) bool {
			return isContainerd(p) && p.Snapshotter() != platform.Overlayfs
		}),
		Key: keySnapshotter,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			c := f.Runtimes.Containerd
			s := p.Snapshotter()
			have := slices.Contains(c.Snapshotters, s.String())
			ev := []check.Evidence{check.Ev("runtimes.containerd.snapshotters", c.Snapshotters)}
			if have {
				return check.Ok(s.String()+" configured", ev...)
			}
			switch s {
			case platform.Nydus:
				if b, ok := binary(f, "nydus-snapshotter"); ok {
					return check.Ok("nydus-snapshotter at "+b.Path, ev...)
				}
				return check.Warned("nydus snapshotter not installed yet", "berth install deploys nydus-snapshotter", ev...)
			case platform.Devmapper:
				return check.Failed("devmapper snapshotter not configured: "+p.Hypervisor().String()+" needs block-device rootfs",
					"create an LVM or loop thin pool and configure the devmapper snapshotter (pool_name, root_path, base_image_size) in containerd", ev...)
			case platform.Blockfile:
				return check.Failed("blockfile snapshotter not configured", "configure the blockfile snapshotter (scratch_file, root_path) in containerd", ev...)
			case platform.Erofs:
				if u, ok := unknownOf(f, "runtimes.containerd.version", "kernel.config.EROFS_FS"); ok {
					return check.Unsure("erofs snapshotter not configured, and whether this containerd and kernel can have it is not known", append(ev, u)...)
				}
				if v, ok := parseVersion(c.Version); ok && !v.atLeast(2, 1) {
					return check.Failed("containerd "+v.String()+" has no erofs snapshotter (needs >= 2.1)", "upgrade containerd to 2.1 or newer", ev...)
				}
				if f.Kernel.Config["EROFS_FS"] == "n" {
					return check.Failed("kernel built without EROFS", "use a kernel with CONFIG_EROFS_FS", ev...)
				}
				return check.Warned("erofs snapshotter not configured yet", "berth install enables the erofs snapshotter", ev...)
			}
			return check.Failed(s.String()+" snapshotter not configured", "configure it in containerd", ev...)
		},
	}}
}
