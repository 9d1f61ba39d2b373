package discover

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// remoteNVMeTransports are the NVMe over fabrics transports of
// sys/block/nvme*/device/transport ("pcie" is local).
var remoteNVMeTransports = map[string]bool{"tcp": true, "rdma": true, "fc": true}

// runStorage lists the block devices of sys/block: how a sandbox's disk
// images and the snapshotters' backing stores would be served.
func runStorage(_ context.Context, s *session, f *facts.Facts) {
	s.blockDevices(f)
	s.filesystems(f)
}

func (s *session) blockDevices(f *facts.Facts) {
	entries, err := s.root.FS().ReadDir("sys/block")
	if err != nil {
		s.unknownf("storage.blockDevices", "%s", ReadReason("sys/block", err))
		return
	}
	for _, e := range entries {
		name := e.Name()
		d := facts.BlockDevice{Name: name}
		d.Transport, d.Remote = s.blockTransport(name, 0)
		size, ok := s.readString("", path.Join("sys/block", name, "size"))
		sectors, perr := strconv.ParseUint(size, 10, 64)
		switch {
		case !ok:
			s.unknownf("storage.blockDevices."+name+".sizeBytes", "%s: sys/block/%s/size", facts.ReasonMissing, name)
		case perr != nil:
			s.unknownf("storage.blockDevices."+name+".sizeBytes", "%s", unparseable("sys/block/"+name+"/size", 1, "expected a number of 512-byte sectors"))
		default:
			// sys/block sizes are in 512-byte sectors whatever the
			// device's logical block size.
			d.SizeBytes = sectors * 512
		}
		if d.SizeBytes == 0 && ok && perr == nil && (d.Transport == "loop" || d.Transport == "zram" || strings.HasPrefix(name, "ram")) {
			// Unused loop, ram and zram slots are noise.
			continue
		}
		if r, ok := s.readString("", path.Join("sys/block", name, "queue/rotational")); ok {
			d.Rotational = r == "1"
		}
		if d.Transport == "dm" {
			d.DMName, _ = s.readString("", path.Join("sys/block", name, "dm/name"))
		}
		if d.Transport == "dm" || d.Transport == "md" {
			d.Slaves = s.slaves(name)
		}
		f.Storage.BlockDevices = append(f.Storage.BlockDevices, d)
	}
}

// blockTransport classifies a block device by its name and the sysfs path
// of its device, and says whether its data travels over the network. A
// dm or md device is remote when one of its slaves is.
func (s *session) blockTransport(name string, depth int) (transport string, remote bool) {
	devPath := s.linkTarget(path.Join("sys/block", name)) + " " + s.linkTarget(path.Join("sys/block", name, "device"))
	switch {
	case strings.HasPrefix(name, "nvme"):
		t, _ := s.readString("", path.Join("sys/block", name, "device/transport"))
		return "nvme", remoteNVMeTransports[t] || strings.Contains(devPath, "nvme-fabrics")
	case strings.HasPrefix(name, "vd"):
		return "virtio", false
	case strings.HasPrefix(name, "xvd"):
		return "xen", false
	case strings.HasPrefix(name, "nbd"):
		return "nbd", true
	case strings.HasPrefix(name, "rbd"):
		return "rbd", true
	case strings.HasPrefix(name, "loop"):
		return "loop", false
	case strings.HasPrefix(name, "zram"):
		return "zram", false
	case strings.HasPrefix(name, "dm-"), strings.HasPrefix(name, "md"):
		transport = "dm"
		if strings.HasPrefix(name, "md") {
			transport = "md"
		}
		if depth < 4 {
			for _, sl := range s.slaves(name) {
				if _, r := s.blockTransport(sl, depth+1); r {
					remote = true
				}
			}
		}
		return transport, remote
	case strings.HasPrefix(name, "sd"), strings.HasPrefix(name, "sr"):
		switch {
		case strings.Contains(devPath, "/session"):
			// iSCSI devices hang below the iSCSI session in sysfs.
			return "iscsi", true
		case strings.Contains(devPath, "/usb"):
			return "usb", false
		case strings.Contains(devPath, "/ata"):
			return "sata", false
		}
		return "scsi", false
	}
	return "other", false
}

// slaves lists the disks a dm or md device is built on. A slave that is a
// partition (LVM physical volumes usually are; it has a "partition" file
// and sits in its disk's directory) is named by its disk, which is what
// sys/block lists.
func (s *session) slaves(name string) []string {
	dir := path.Join("sys/block", name, "slaves")
	ents, _ := s.root.FS().ReadDir(dir)
	var out []string
	for _, e := range ents {
		disk := e.Name()
		if s.exists(path.Join(dir, disk, "partition")) {
			if t := s.linkTarget(path.Join(dir, disk)); t != "" {
				disk = path.Base(path.Dir(t))
			}
		}
		if !slices.Contains(out, disk) {
			out = append(out, disk)
		}
	}
	return out
}

// linkTarget returns the target of a sysfs symlink, or "" when p is not
// one (a fixture may store a plain directory).
func (s *session) linkTarget(p string) string {
	t, err := s.root.FS().ReadLink(p)
	if err != nil {
		return ""
	}
	return t
}

// fsAlways are the directories measured whether or not they exist yet (by
// their nearest existing ancestor, where they would be created): the
// prefixes guest kernels and images are installed under, and containerd's
// default root, which holds its content store and the overlayfs,
// blockfile and erofs snapshots.
var fsAlways = []string{"opt/kata", "opt/berth", "var/lib/containerd"}

// fsIfPresent are the other runtimes' and snapshotters' roots, measured
// only where they exist: the distributions' containerd roots, the nydus
// snapshotter's (kata-deploy's default), CRI-O's storage.
var fsIfPresent = []string{
	"var/lib/rancher/k3s/agent/containerd",
	"var/lib/rancher/rke2/agent/containerd",
	"var/lib/k0s/containerd",
	"var/snap/microk8s/common/var/lib/containerd",
	"var/lib/containerd-nydus",
	"var/lib/containers/storage",
}

// filesystems measures the file systems guest images and snapshots fill.
// statfs needs the live file system: an offline root uses the values a
// snapshot recorded (probe "filesystems"), else the fact is unknown.
func (s *session) filesystems(f *facts.Facts) {
	if !s.root.Live() {
		var rec []facts.Filesystem
		switch err := s.root.Probe("filesystems", &rec); {
		case err == nil:
			for i := range rec {
				rec[i].Recorded = true
			}
			f.Storage.Filesystems = rec
		case errors.Is(err, hostfs.ErrOffline):
			s.unknownf("storage.filesystems", "%s", facts.ReasonOffline)
		default:
			s.unknownf("storage.filesystems", "%s: recorded probe filesystems: %v", facts.ReasonUnparseable, err)
		}
		return
	}
	var out []facts.Filesystem
	for _, p := range append(append([]string(nil), fsAlways...), fsIfPresent...) {
		measured := p
		if !s.isDir(p) {
			if !isAlways(p) {
				continue
			}
			measured = s.existingAncestor(p)
		}
		fsys, err := s.statfs(p, measured)
		if err != nil {
			s.unknownf("storage.filesystems", "%s", err)
			continue
		}
		out = append(out, fsys)
	}
	f.Storage.Filesystems = out
	hostfs.RecordProbe(s.root, "filesystems", out)
}

func isAlways(p string) bool {
	for _, a := range fsAlways {
		if a == p {
			return true
		}
	}
	return false
}

func (s *session) isDir(p string) bool {
	fi, err := s.root.FS().Stat(p)
	return err == nil && fi.IsDir()
}

// existingAncestor is the nearest directory above p that exists ("." at
// worst).
func (s *session) existingAncestor(p string) string {
	for p != "." && p != "/" && p != "" {
		p = path.Dir(p)
		if p == "." || s.isDir(p) {
			return p
		}
	}
	return "."
}

// statfs measures the file system of measured (inside the root) and
// finds its block device through sys/dev/block/<major>:<minor>.
func (s *session) statfs(p, measured string) (facts.Filesystem, error) {
	fsys := facts.Filesystem{Path: p, Measured: measured}
	abs := filepath.Join(s.root.Path(), filepath.FromSlash(measured))
	var st unix.Statfs_t
	if err := unix.Statfs(abs, &st); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fsys, fmt.Errorf("%s: statfs %s", facts.ReasonPermission, measured)
		}
		return fsys, fmt.Errorf("unreadable: statfs %s: %v", measured, err)
	}
	bsize := uint64(st.Bsize)
	fsys.SizeBytes, fsys.FreeBytes = uint64(st.Blocks)*bsize, uint64(st.Bavail)*bsize
	var fst unix.Stat_t
	if err := unix.Stat(abs, &fst); err == nil {
		dev := uint64(fst.Dev)
		fsys.Device = s.blockDeviceOf(unix.Major(dev), unix.Minor(dev))
	}
	return fsys, nil
}

// blockDeviceOf names the disk behind a device number: the link
// sys/dev/block/M:m points at the device's sysfs directory, which for a
// partition (it has a "partition" file) sits inside its disk's. Devices
// without one (tmpfs, overlay and NFS have anonymous numbers) give "".
func (s *session) blockDeviceOf(major, minor uint32) string {
	link := fmt.Sprintf("sys/dev/block/%d:%d", major, minor)
	t := s.linkTarget(link)
	if t == "" {
		return ""
	}
	if s.exists(link + "/partition") {
		return path.Base(path.Dir(t))
	}
	return path.Base(t)
}
