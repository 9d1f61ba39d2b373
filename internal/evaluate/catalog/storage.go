package catalog

import (
	"fmt"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// Free-space thresholds.
//
// The Kata payload: the kata-static tarball for amd64 that Kata's CI built
// in March 2026 was 1,595,054,992 bytes (kata-containers PR #12669, CI
// log "Final size is 1595054992 bytes"). berth keeps the running version while
// it stages the next (versions/<id>/, switched atomically), so an upgrade
// needs room for two: below one payload the install cannot succeed, below
// two the next upgrade will not.
//
// Sandbox disks: with the erofs snapshotter in disk mode kata-deploy gives
// each container a 10G disk-backed writable layer (kata-deploy Helm chart
// values.yaml, erofsSnapshotterMode: "disk" -> default_size = "10G"), and
// Kata's devmapper setups use base_image_size = "10GB"; blockfile
// scratch-based layers grow the same way. Below one such layer of free
// space the first sandbox that writes fills the disk.
//
// Images: the kubelet evicts pods and garbage-collects images when its
// image file system falls below 15% free (default hard eviction threshold
// imagefs.available<15%, Kubernetes "Node-pressure Eviction").
const (
	payloadFailBytes  = 2 << 30
	payloadWarnBytes  = 4 << 30
	rwLayerBytes      = 10 << 30
	imagefsMinPercent = 15
)

// prefixPaths are the install prefixes measured by discovery: berth's
// default and kata-deploy's.
func prefixPaths() []string { return []string{"opt/berth", "opt/kata"} }

func filesystem(f *facts.Facts, path string) (facts.Filesystem, bool) {
	for _, fs := range f.Storage.Filesystems {
		if fs.Path == path {
			return fs, true
		}
	}
	return facts.Filesystem{}, false
}

func blockDevice(f *facts.Facts, name string) (facts.BlockDevice, bool) {
	for _, d := range f.Storage.BlockDevices {
		if d.Name == name {
			return d, true
		}
	}
	return facts.BlockDevice{}, false
}

// gib renders bytes for messages.
func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

func fsEvidence(fs facts.Filesystem) check.Evidence {
	return check.Ev("storage.filesystems["+fs.Path+"]", fmt.Sprintf("%s free of %s on %s (measured at /%s)", gib(fs.FreeBytes), gib(fs.SizeBytes), orDefault(fs.Device, "no block device"), fs.Measured))
}

// usesBlockPool holds for platforms whose sandboxes' disks come from a
// devmapper thin pool or blockfile scratch files.
func usesBlockPool(p platform.Platform) bool {
	return isContainerd(p) && p.Snapshotter().Pooled()
}

func storageChecks() []check.Check {
	return []check.Check{{
		ID:    "storage.free.prefix",
		Title: "for free space for the Kata payload",
		Why: "berth installs the hypervisors, guest kernels and guest images (the kata-static payload is about 1.5 GB) under its " +
			"prefix and keeps the running version while it stages the next; a full /opt fails the install or the next upgrade half-way.",
		Reads:     []string{"storage.filesystems"},
		Platforms: "all",
		Remedies:  []string{"free space on the file system holding /opt/berth (and /opt/kata), or install with --prefix on a larger one"},
		Applies:   check.Always(check.Blocking),
		Run: func(f *facts.Facts) check.Result {
			var (
				ev    []check.Evidence
				worst *facts.Filesystem
			)
			for _, p := range prefixPaths() {
				fs, ok := filesystem(f, p)
				if !ok {
					continue
				}
				ev = append(ev, fsEvidence(fs))
				if worst == nil || fs.FreeBytes < worst.FreeBytes {
					worst = &fs
				}
			}
			switch {
			case worst == nil:
				return check.Unsure("no install prefix was measured", check.Ev("storage.filesystems", len(f.Storage.Filesystems)))
			case worst.FreeBytes < payloadFailBytes:
				return check.Failed(fmt.Sprintf("only %s free under /%s, the Kata payload needs about %s", gib(worst.FreeBytes), worst.Path, gib(payloadFailBytes)),
					"free space on the file system of /"+worst.Measured+" or install with --prefix on a larger file system", ev...)
			case worst.FreeBytes < payloadWarnBytes:
				return check.Warned(fmt.Sprintf("%s free under /%s: enough for one Kata payload, not for an upgrade beside it (%s)", gib(worst.FreeBytes), worst.Path, gib(payloadWarnBytes)),
					"free space on the file system of /"+worst.Measured+" before the next upgrade", ev...)
			}
			return check.Ok(fmt.Sprintf("%s free under /%s", gib(worst.FreeBytes), worst.Path), ev...)
		},
	}, {
		ID:    "storage.free.images",
		Title: "for free space for images and sandbox disks",
		Why: "Pulled images, snapshots and, with the erofs or blockfile snapshotter, every container's writable disk (10G each by " +
			"kata-deploy's default) are files under the container runtime's root; the kubelet starts evicting pods below 15% free.",
		Reads:     []string{"storage.filesystems"},
		Platforms: "all",
		Remedies: []string{
			"free space under the container runtime's root (crictl rmi --prune) or move it to a larger file system",
			"with erofs or blockfile, keep at least one writable layer (10 GiB) free, or lower default_size in the snapshotter's config",
		},
		Applies: onNode(check.Always(check.Blocking)),
		Key:     check.ByDistribution | check.BySnapshotter,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			root := p.Distribution().RuntimeRoot()
			fs, ok := filesystem(f, root)
			if !ok {
				return check.Unsure("/"+root+" (the "+p.Distribution().String()+" runtime root) does not exist on this host", check.Ev("storage.filesystems", len(f.Storage.Filesystems)))
			}
			ev := fsEvidence(fs)
			s := p.Snapshotter()
			if s.LayerFiles() && fs.FreeBytes < rwLayerBytes {
				return check.Failed(fmt.Sprintf("only %s free under /%s: less than one %s writable layer (%s)", gib(fs.FreeBytes), root, s, gib(rwLayerBytes)),
					"free space under /"+root+" or lower default_size of the "+s.String()+" snapshotter", ev)
			}
			if fs.SizeBytes > 0 && fs.FreeBytes*100 < fs.SizeBytes*imagefsMinPercent {
				return check.Warned(fmt.Sprintf("%s free of %s under /%s: below the kubelet's %d%% image eviction threshold", gib(fs.FreeBytes), gib(fs.SizeBytes), root, imagefsMinPercent),
					"free space under /"+root+" (crictl rmi --prune) or grow the file system", ev)
			}
			return check.Ok(fmt.Sprintf("%s free under /%s", gib(fs.FreeBytes), root), ev)
		},
	}, {
		ID:    "storage.pool.remote",
		Title: "if the block snapshotter's storage is local",
		Why: "With devmapper or blockfile every sandbox's root disk is carved from the snapshotter's pool. On an iSCSI, NBD, RBD or " +
			"NVMe-oF device each guest's disk I/O crosses the network, and a storage-network outage stalls every sandbox at once " +
			"(a thin pool's metadata can be left inconsistent).",
		Parent:    "snapshotter.available",
		Reads:     []string{"storage.blockDevices"},
		ReadsFor:  poolReads,
		Platforms: "containerd platforms using the devmapper or blockfile snapshotter (warning)",
		Remedies:  []string{"put the devmapper thin pool (or the blockfile root) on a local NVMe or SATA disk"},
		Applies:   check.When(check.Warning, usesBlockPool),
		Key:       check.ByDistribution | check.BySnapshotter,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			var (
				what string
				dev  facts.BlockDevice
				ok   bool
				ev   []check.Evidence
			)
			if p.Snapshotter().ThinPool() {
				pool := ""
				if c := f.Runtimes.Containerd; c != nil {
					pool = c.DevmapperPool
				}
				ev = append(ev, check.Ev("runtimes.containerd.devmapperPool", pool))
				if pool == "" {
					return check.Unsure("the devmapper pool_name was not found in the containerd config", ev...)
				}
				// LVM names an active thin pool's device <vg>-<lv>-tpool.
				for _, d := range f.Storage.BlockDevices {
					if d.DMName != "" && (d.DMName == pool || d.DMName == pool+"-tpool") {
						dev, ok = d, true
						break
					}
				}
				if !ok {
					return check.Unsure("no device-mapper device is named "+pool+" (the pool is not active)", ev...)
				}
				what = "devmapper pool " + pool
			} else {
				root := p.Distribution().RuntimeRoot()
				fs, found := filesystem(f, root)
				if !found || fs.Device == "" {
					return check.Unsure("no block device found under /"+root, check.Ev("storage.filesystems", len(f.Storage.Filesystems)))
				}
				ev = append(ev, fsEvidence(fs))
				if dev, ok = blockDevice(f, fs.Device); !ok {
					return check.Unsure("block device "+fs.Device+" under /"+root+" is not in sys/block", ev...)
				}
				what = "blockfile root /" + root
			}
			ev = append(ev, check.Ev("storage.blockDevices["+dev.Name+"]", fmt.Sprintf("%s remote=%v slaves=[%s]", dev.Transport, dev.Remote, strings.Join(dev.Slaves, " "))))
			if dev.Remote {
				return check.Failed(fmt.Sprintf("%s is on network storage: %s (%s)", what, dev.Name, remoteChain(f, dev)),
					"move the "+what+" to a local NVMe or SATA disk", ev...)
			}
			return check.Ok(fmt.Sprintf("%s is on local %s device %s", what, dev.Transport, dev.Name), ev...)
		},
	}}
}

// poolReads are the facts storage.pool.remote reads on p.
func poolReads(p platform.Platform) []string {
	if p.Snapshotter().ThinPool() {
		return []string{"runtimes.containerd.devmapperPool"}
	}
	return []string{"storage.filesystems"}
}

// remoteChain names the transports under a dm or md device, down to the
// network one ("dm on iscsi sdb").
func remoteChain(f *facts.Facts, d facts.BlockDevice) string {
	parts := []string{d.Transport}
	seen := map[string]bool{d.Name: true}
	for len(d.Slaves) > 0 {
		next, found := facts.BlockDevice{}, false
		for _, s := range d.Slaves {
			if b, ok := blockDevice(f, s); ok && b.Remote && !seen[s] {
				next, found = b, true
				break
			}
		}
		if !found {
			break
		}
		seen[next.Name] = true
		parts = append(parts, next.Transport+" "+next.Name)
		d = next
	}
	return strings.Join(parts, " on ")
}
