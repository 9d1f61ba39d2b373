package discover

import (
	"context"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/host/facts"
)

// NetworkProbe asks discovery to probe services over the network (berth
// check --network). The targets come from the caller: discovery does not
// know which platform will use them. Probe is the caller's (netprobe, in
// berth-cluster), so that discovery links no HTTP client.
type NetworkProbe struct {
	// Probe probes every target and says what each answered.
	Probe func(ctx context.Context) []facts.Endpoint
	// Timeout bounds each probe; it is recorded with the result.
	Timeout time.Duration
}

// Reasons a reachability probe did not run.
const (
	notCheckedFlag    = "not checked (--network not given)"
	notCheckedOffline = "not checked (" + facts.ReasonOffline + ": the network seen from here is not the host's)"
	notCheckedMounted = "not checked (a host mounted at --root: berth's network may not be the host's)"
)

// runNetwork finds the NICs that can create SR-IOV virtual functions, the
// way to give a VM sandbox its own network device, and runs the
// reachability probes when asked to.
func runNetwork(ctx context.Context, s *session, f *facts.Facts) {
	s.sriovNICs(f)
	f.Network.Reachability = s.reachability(ctx)
}

func (s *session) sriovNICs(f *facts.Facts) {
	entries, err := s.root.FS().ReadDir("sys/class/net")
	if err != nil {
		s.unknownf("network.sriovNics", "%s", ReadReason("sys/class/net", err))
		return
	}
	for _, e := range entries {
		dev := path.Join("sys/class/net", e.Name(), "device")
		total, ok := s.readString("", path.Join(dev, "sriov_totalvfs"))
		if !ok {
			continue // not SR-IOV capable (or a virtual interface)
		}
		n, err := strconv.Atoi(total)
		if err != nil {
			s.unknownf("network.sriovNics", "%s", unparseable(path.Join(dev, "sriov_totalvfs"), 1, "expected a number of virtual functions"))
			continue
		}
		if n <= 0 {
			continue
		}
		nic := facts.SRIOVNIC{Interface: e.Name(), TotalVFs: n}
		if v, ok := s.readString("", path.Join(dev, "sriov_numvfs")); ok {
			nic.NumVFs, _ = strconv.Atoi(v)
		}
		if t := s.linkTarget(dev); t != "" {
			nic.Address = path.Base(t)
		}
		if t := s.linkTarget(path.Join(dev, "driver")); t != "" {
			nic.Driver = path.Base(t)
		}
		nic.VFs = s.virtualFunctions(dev)
		f.Network.SRIOVNICs = append(f.Network.SRIOVNICs, nic)
	}
}

// virtualFunctions lists the VFs of the PF at dev by its virtfn<N> links,
// in VF order, with the driver and IOMMU group of each. A VF bound to
// vfio-pci has no network interface of its own, so the PF is the only
// place to find it.
func (s *session) virtualFunctions(dev string) []facts.SRIOVVF {
	ents, err := s.root.FS().ReadDir(dev)
	if err != nil {
		return nil
	}
	type numbered struct {
		n  int
		vf facts.SRIOVVF
	}
	var vfs []numbered
	for _, e := range ents {
		num, ok := strings.CutPrefix(e.Name(), "virtfn")
		n, err := strconv.Atoi(num)
		if !ok || err != nil {
			continue
		}
		t := s.linkTarget(path.Join(dev, e.Name()))
		if t == "" {
			continue
		}
		vf := facts.SRIOVVF{Address: path.Base(t)}
		dir := path.Join(pciDevicesDir, vf.Address)
		if d := s.linkTarget(dir + "/driver"); d != "" {
			vf.Driver = path.Base(d)
		}
		if g := s.linkTarget(dir + "/iommu_group"); g != "" {
			if id, err := strconv.Atoi(path.Base(g)); err == nil {
				vf.IOMMUGroup = &id
			}
		}
		vfs = append(vfs, numbered{n, vf})
	}
	sort.Slice(vfs, func(i, j int) bool { return vfs[i].n < vfs[j].n })
	out := make([]facts.SRIOVVF, len(vfs))
	for i, v := range vfs {
		out[i] = v.vf
	}
	return out
}

// reachability runs the network probes on the live "/" root when asked to.
// What was not checked is not unknown: see facts.Reachability.
func (s *session) reachability(ctx context.Context) facts.Reachability {
	np := s.opt.Network
	switch {
	case np == nil:
		return facts.Reachability{NotChecked: notCheckedFlag}
	case !s.root.Live():
		return facts.Reachability{NotChecked: notCheckedOffline}
	case s.root.Path() != "/":
		// A container looking at /host may sit in its own network
		// namespace: a verdict about its network is not the host's.
		return facts.Reachability{NotChecked: notCheckedMounted}
	}
	r := facts.Reachability{Checked: true, TimeoutMS: np.Timeout.Milliseconds()}
	r.Targets = np.Probe(ctx)
	return r
}
