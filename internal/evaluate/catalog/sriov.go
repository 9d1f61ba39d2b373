package catalog

import (
	"fmt"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// sriovRemedy binds VFs for VM passthrough.
const sriovRemedy = "bind the virtual functions meant for Kata pods to vfio-pci (driverctl set-override <VF> vfio-pci, or the SR-IOV network operator's SriovNetworkNodePolicy with deviceType: vfio-pci) and expose them with the SR-IOV device plugin"

// canPassPCI holds for hypervisors with VFIO device passthrough:
// Firecracker has none, so a VF cannot reach a kata-fc sandbox.
func canPassPCI(p platform.Platform) bool { return p.Hypervisor().PassesPCI() }

func sriovChecks() []check.Check {
	return nodeArea([]check.Check{{
		ID:    "sriov.vf.vfio",
		Title: "if SR-IOV virtual functions are bound for passthrough",
		Why: "A Kata sandbox takes a NIC virtual function through VFIO, so the VF must be bound to vfio-pci; a VF left on the " +
			"NIC's own VF driver (iavf, mlx5_core) is a host network device that only runc pods can use. Hosts without enabled " +
			"VFs do not pass NICs through, and the check is skipped.",
		Reads:     []string{"network.sriovNics"},
		Platforms: "QEMU and Cloud Hypervisor platforms (warning); skipped without enabled virtual functions",
		Remedies:  []string{sriovRemedy},
		Applies:   check.When(check.Warning, canPassPCI),
		Run: func(f *facts.Facts) check.Result {
			var capable, enabled, vfio, other []string
			for _, nic := range f.Network.SRIOVNICs {
				capable = append(capable, fmt.Sprintf("%s (%s, %d VFs max)", nic.Interface, orDefault(nic.Driver, "no driver"), nic.TotalVFs))
				if nic.NumVFs == 0 {
					continue
				}
				enabled = append(enabled, fmt.Sprintf("%s: %d of %d", nic.Interface, nic.NumVFs, nic.TotalVFs))
				for _, vf := range nic.VFs {
					if isVFIO(vf.Driver) {
						vfio = append(vfio, vf.Address)
					} else {
						other = append(other, vf.Address+" ("+orDefault(vf.Driver, "no driver")+")")
					}
				}
			}
			ev := []check.Evidence{check.Ev("network.sriovNics", capable), check.Ev("network.sriovNics.numVfs", enabled),
				check.Ev("network.sriovNics.vfs.driver", vfioSummary(vfio, other))}
			switch {
			case len(capable) == 0:
				return check.Result{Status: check.Skip, Message: "no SR-IOV capable NIC: no NIC passthrough", Evidence: ev}
			case len(enabled) == 0:
				return check.Result{Status: check.Skip, Message: "SR-IOV capable NICs have no virtual functions enabled: NIC passthrough not in use", Evidence: ev}
			case len(vfio) > 0:
				return check.Ok(fmt.Sprintf("%d virtual functions on vfio-pci (%s)", len(vfio), strings.Join(vfio, ", ")), ev...)
			case len(other) == 0:
				return check.Unsure("virtual functions are enabled ("+strings.Join(enabled, "; ")+") but none was found under the NIC", ev...)
			}
			return check.Failed(fmt.Sprintf("no virtual function is bound to vfio-pci: %s", strings.Join(other, ", ")), sriovRemedy, ev...)
		},
	}})
}

// isVFIO accepts vfio-pci and its vendor variants (mlx5_vfio_pci ...).
func isVFIO(drv string) bool {
	return drv == "vfio-pci" || strings.HasSuffix(drv, "-vfio-pci") || strings.HasSuffix(drv, "_vfio_pci")
}

func vfioSummary(vfio, other []string) string {
	return fmt.Sprintf("%d on vfio-pci, %d on other drivers", len(vfio), len(other))
}
