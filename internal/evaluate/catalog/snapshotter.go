package catalog

import (
	"slices"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

func snapshotterChecks() []check.Check {
	return []check.Check{{
		ID:        "snapshotter.available",
		Title:     "for the platform's snapshotter",
		Why:       "Guest-pull platforms need the nydus snapshotter; Firecracker has no shared filesystem and needs a block-device snapshotter (devmapper or blockfile); GPU platforms use erofs; confidential AKS (kata-cc) uses tardev.",
		Parent:    "runtime.present",
		Reads:     []string{"runtimes.containerd.snapshotters"},
		Platforms: "containerd platforms with a snapshotter other than overlayfs",
		Remedies: []string{
			"nydus: berth install (or the node-installer) installs containerd-nydus-grpc, writes the proxy plugin berth-nydus and enables and starts berth-nydus-snapshotter.service before restarting containerd (berth config apply --restart starts it; without --restart: systemctl enable --now berth-nydus-snapshotter)",
			"devmapper: create a thin pool and configure [plugins.\"io.containerd.snapshotter.v1.devmapper\"] pool_name, root_path, base_image_size",
			"blockfile: configure [plugins.\"io.containerd.snapshotter.v1.blockfile\"] scratch_file and root_path",
			"erofs: containerd >= 2.1 with the erofs snapshotter and CONFIG_EROFS_FS",
			"tardev: create the AKS node pool with --workload-runtime KataCcIsolation (AKS installs tardev-snapshotter and its proxy plugin)",
		},
		Applies: check.When(check.Blocking, func(p platform.Platform) bool {
			return isContainerd(p) && p.Snapshotter().Dedicated()
		}),
		Key: keySnapshotter,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			c := f.Runtimes.Containerd
			s := p.Snapshotter()
			have := slices.Contains(c.Snapshotters, s.String()) ||
				(s.Setup().Proxy != "" && slices.Contains(c.Snapshotters, s.Setup().Proxy))
			ev := []check.Evidence{check.Ev("runtimes.containerd.snapshotters", c.Snapshotters)}
			if have {
				return check.Ok(s.String()+" configured", ev...)
			}
			// How the snapshotter gets onto a node is a row of
			// platform's snapshotter table: who installs it, what it
			// needs from containerd and the kernel.
			st := s.Setup()
			if st.Binary != "" {
				if b, ok := binary(f, st.Binary); ok {
					return check.Ok(st.Binary+" at "+b.Path, ev...)
				}
			}
			if st.MinContainerd != nil || st.KernelConfig != "" {
				if u, ok := unknownOf(f, "runtimes.containerd.version", "kernel.config."+st.KernelConfig); ok {
					return check.Unsure(s.String()+" snapshotter not configured, and whether this containerd and kernel can have it is not known", append(ev, u)...)
				}
				if v, ok := parseVersion(c.Version); ok && st.MinContainerd != nil && !v.atLeast(st.MinContainerd...) {
					return check.Failed("containerd "+v.String()+" has no "+s.String()+" snapshotter (needs >= "+fmtVersion(st.MinContainerd...)+")",
						"upgrade containerd to "+fmtVersion(st.MinContainerd...)+" or newer", ev...)
				}
				if st.KernelConfig != "" && f.Kernel.Config[st.KernelConfig] == "n" {
					return check.Failed("kernel built without "+strings.TrimSuffix(st.KernelConfig, "_FS"), "use a kernel with CONFIG_"+st.KernelConfig, ev...)
				}
			}
			msg := strings.ReplaceAll(st.Missing, "{hypervisor}", p.Hypervisor().String())
			if msg == "" {
				msg = s.String() + " snapshotter not configured"
			}
			if st.ByBerth {
				return check.Warned(msg, st.Remedy, ev...)
			}
			return check.Failed(msg, orDefault(st.Remedy, "configure it in containerd"), ev...)
		},
	}}
}
