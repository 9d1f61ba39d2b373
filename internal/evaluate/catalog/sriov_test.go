package catalog

import (
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

func TestSRIOV(t *testing.T) {
	nic := func(num int, drivers ...string) facts.SRIOVNIC {
		n := facts.SRIOVNIC{Interface: "ens1f0np0", Address: "0000:17:00.0", Driver: "ice", TotalVFs: 128, NumVFs: num}
		for i, d := range drivers {
			n.VFs = append(n.VFs, facts.SRIOVVF{Address: "0000:17:01." + itoa(i), Driver: d})
		}
		return n
	}
	tests := []struct {
		name   string
		nics   []facts.SRIOVNIC
		status check.Status
		msg    string
	}{
		{"no SR-IOV NIC", nil, check.Skip, "no SR-IOV capable NIC"},
		{"capable, no VFs enabled", []facts.SRIOVNIC{nic(0)}, check.Skip, "no virtual functions enabled"},
		{"VFs on vfio-pci", []facts.SRIOVNIC{nic(2, "vfio-pci", "iavf")}, check.Pass, "1 virtual functions on vfio-pci"},
		{"mlx5 vendor variant counts", []facts.SRIOVNIC{nic(1, "mlx5_vfio_pci")}, check.Pass, "on vfio-pci"},
		{"VFs only on the host driver", []facts.SRIOVNIC{nic(2, "iavf", "")}, check.Warn, "0000:17:01.1 (no driver)"},
		{"VFs enabled but not listed", []facts.SRIOVNIC{nic(4)}, check.Unknown, "none was found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := readyFacts()
			f.Network.SRIOVNICs = tt.nics
			fd, ok := finding(t, f, "kubeadm-qemu-none", "sriov.vf.vfio")
			if !ok {
				t.Fatal("sriov.vf.vfio does not apply to kubeadm-qemu-none")
			}
			wantFinding(t, fd, tt.status, tt.msg)
		})
	}
	t.Run("Firecracker has no VFIO", func(t *testing.T) {
		if _, ok := finding(t, readyFacts(), "kubeadm-firecracker-none", "sriov.vf.vfio"); ok {
			t.Error("sriov.vf.vfio applies to Firecracker")
		}
	})
	t.Run("unknown NICs", func(t *testing.T) {
		f := readyFacts()
		f.Network.SRIOVNICs = []facts.SRIOVNIC{nic(1, "vfio-pci")}
		f.Unknown = []facts.Missing{{Field: "network.sriovNics", Reason: facts.ReasonMissing + ": sys/class/net"}}
		fd, _ := finding(t, f, "kubeadm-qemu-none", "sriov.vf.vfio")
		wantFinding(t, fd, check.Unknown, "network.sriovNics")
	})
}
