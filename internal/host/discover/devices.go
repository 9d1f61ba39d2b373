package discover

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// deviceNodes are the device nodes that matter, relative to the root.
// dev/sev-guest and dev/tdx_guest exist only inside a confidential VM;
// they tell a check that this host is itself a TEE guest.
var deviceNodes = []string{
	"dev/kvm",
	"dev/vhost-vsock",
	"dev/vhost-net",
	"dev/net/tun",
	"dev/sev",
	"dev/sev-guest",
	"dev/tdx_guest",
	"dev/vfio/vfio",
	"dev/iommu",
	"dev/sgx_enclave",
	"dev/sgx_provision",
	"dev/mshv",
	// The directory of the cloud-api-adaptor's socket
	// (/run/peerpod/hypervisor.sock, remote_hypervisor_socket in Kata's
	// configuration-remote), which its DaemonSet mounts from the host.
	// The directory, not the socket: fact paths are dotted.
	"run/peerpod",
}

// runDevices fills Facts.Devices: the device nodes, and the KVM probe.
//
// Policy: a node that does not exist is listed with Exists false (absence
// is a fact). A node that cannot be examined (permission) is left out and
// recorded as unknown under "devices.nodes.<path>". The KVM probe runs only
// on a live root; on an offline root a recorded "kvm" probe is used, else
// Devices.KVM stays nil with "devices.kvm" unknown (offline root).
func runDevices(_ context.Context, s *session, f *facts.Facts) {
	groups := s.groupNames()
	nodes := map[string]facts.DeviceNode{}
	paths := append([]string(nil), deviceNodes...)
	paths = append(paths, s.vfioGroupNodes()...)
	for _, p := range paths {
		n, ok := s.deviceNode(p, groups)
		if ok {
			nodes[p] = n
		}
	}
	if s.root.Live() {
		hostfs.RecordProbe(s.root, "devices", nodes)
	} else {
		// A snapshot may carry what the nodes looked like on the host
		// (device nodes do not survive in a tarball or fixture tree).
		var rec map[string]facts.DeviceNode
		switch err := s.root.Probe("devices", &rec); {
		case err == nil:
			for p, n := range rec {
				nodes[p] = n
			}
		case errors.Is(err, hostfs.ErrOffline):
		default:
			s.unknownf("devices.nodes", "%s: %v", facts.ReasonUnparseable, err)
		}
	}
	f.Devices.Nodes = nodes
	f.Devices.KVM = s.kvmProbe()
}

// deviceNode examines one node. In fixture trees a plain file stands for a
// device node: it is reported as existing with a file's mode.
func (s *session) deviceNode(p string, groups map[int]string) (facts.DeviceNode, bool) {
	fi, err := s.root.FS().Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return facts.DeviceNode{Exists: false}, true
	case err != nil:
		s.unknownf("devices.nodes."+p, "%s", ReadReason(p, err))
		return facts.DeviceNode{}, false
	}
	n := facts.DeviceNode{Exists: true, Mode: lsMode(fi.Mode())}
	if uid, gid, ok := fileOwner(fi); ok {
		n.UID, n.GID = &uid, &gid
		n.Group = groups[gid]
	}
	if s.root.Live() {
		ok := accessRW(filepath.Join(s.root.Path(), filepath.FromSlash(p)))
		n.Accessible = &ok
	}
	return n, true
}

// vfioGroupNodes lists dev/vfio/<group> (one per group with a vfio-bound
// device).
func (s *session) vfioGroupNodes() []string {
	ents, err := s.root.FS().ReadDir("dev/vfio")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, path.Join("dev/vfio", e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// groupNames reads the root's etc/group (not that of the machine berth
// runs on) to name the group owning each node. Missing or malformed lines
// only cost names.
func (s *session) groupNames() map[int]string {
	b, ok := s.readFile("", "etc/group")
	if !ok {
		return nil
	}
	return parseGroup(string(b))
}

// parseGroup parses etc/group lines "name:password:gid:members".
func parseGroup(text string) map[int]string {
	out := map[int]string{}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' {
			continue
		}
		parts := strings.SplitN(l, ":", 4)
		if len(parts) < 3 || parts[0] == "" {
			continue
		}
		gid, err := strconv.Atoi(parts[2])
		if err != nil || gid < 0 {
			continue
		}
		if _, dup := out[gid]; !dup {
			out[gid] = parts[0]
		}
	}
	return out
}

// lsMode renders a mode as ls does: "crw-rw----".
func lsMode(m fs.FileMode) string {
	var t byte = '-'
	switch {
	case m&fs.ModeCharDevice != 0:
		t = 'c'
	case m&fs.ModeDevice != 0:
		t = 'b'
	case m&fs.ModeDir != 0:
		t = 'd'
	case m&fs.ModeSymlink != 0:
		t = 'l'
	case m&fs.ModeSocket != 0:
		t = 's'
	case m&fs.ModeNamedPipe != 0:
		t = 'p'
	}
	return string(t) + m.Perm().String()[1:]
}

// deviceOpener is a live root that opens its device nodes confined to it
// (hostfs.Live).
type deviceOpener interface {
	OpenDevice(name string, flags int) (int, error)
}

// kvmProbe returns the KVM probe result for the root; see runDevices.
func (s *session) kvmProbe() *facts.KVMProbe {
	if s.root.Live() {
		name := filepath.Join(s.root.Path(), "dev", "kvm")
		open := func() (int, error) { return syscall.Open(name, syscall.O_RDWR|syscall.O_CLOEXEC, 0) }
		if d, ok := s.root.(deviceOpener); ok {
			// Resolved inside the root, and only a character device is
			// opened: dev/kvm linked to a file must not be opened for
			// writing.
			open = func() (int, error) { return d.OpenDevice("dev/kvm", syscall.O_RDWR|syscall.O_CLOEXEC) }
		}
		p := probeKVM(open, name)
		hostfs.RecordProbe(s.root, "kvm", p)
		return &p
	}
	var p facts.KVMProbe
	switch err := s.root.Probe("kvm", &p); {
	case err == nil:
		p.Recorded = true
		return &p
	case errors.Is(err, hostfs.ErrOffline):
		s.unknownf("devices.kvm", "%s", facts.ReasonOffline)
	default:
		s.unknownf("devices.kvm", "%s: %v", facts.ReasonUnparseable, err)
	}
	return nil
}
