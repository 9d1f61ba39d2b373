package discover

import (
	"context"
	"path"
	"strconv"

	"berth.dev/berth/internal/facts"
)

// runNetwork finds the NICs that can create SR-IOV virtual functions, the
// way to give a VM sandbox its own network device.
func runNetwork(_ context.Context, s *session, f *facts.Facts) {
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
		f.Network.SRIOVNICs = append(f.Network.SRIOVNICs, nic)
	}
}
