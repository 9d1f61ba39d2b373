package discover

import (
	"context"
	"path"
	"strconv"
	"strings"

	"berth.dev/berth/internal/facts"
)

// remoteNVMeTransports are the NVMe over fabrics transports of
// sys/block/nvme*/device/transport ("pcie" is local).
var remoteNVMeTransports = map[string]bool{"tcp": true, "rdma": true, "fc": true}

// runStorage lists the block devices of sys/block: how a sandbox's disk
// images and the snapshotters' backing stores would be served.
func runStorage(_ context.Context, s *session, f *facts.Facts) {
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
			slaves, _ := s.root.FS().ReadDir(path.Join("sys/block", name, "slaves"))
			for _, sl := range slaves {
				if _, r := s.blockTransport(sl.Name(), depth+1); r {
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

// linkTarget returns the target of a sysfs symlink, or "" when p is not
// one (a fixture may store a plain directory).
func (s *session) linkTarget(p string) string {
	t, err := s.root.FS().ReadLink(p)
	if err != nil {
		return ""
	}
	return t
}
