package discover

import (
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/facts"
)

// GPU vendors by PCI vendor id.
var gpuVendors = map[string]string{"10de": "nvidia", "1002": "amd", "8086": "intel"}

// ccCapableNVIDIA are NVIDIA device ids outside the Hopper and Blackwell
// ranges below that support confidential computing; today every listed
// Hopper id falls inside the range, the list guards against range edits.
var ccCapableNVIDIA = []uint64{
	0x2313, 0x2321, 0x2330, 0x2331, 0x2336, 0x2337, 0x2338, 0x2339, 0x233d, 0x2342, // H100
	0x2335, 0x233b, // H200
	0x2322, 0x2324, 0x233a, // H800
	0x2309, 0x230c, 0x230e, 0x2328, 0x2329, 0x232c, // H20
	0x2343, 0x2345, 0x2348, // GH200
	0x2901, // B200
}

// isGPU tells a GPU from other display devices. Display controllers (class
// 03xx) count for the GPU vendors and 3D controllers (0302) for anyone;
// AMD Instinct accelerators are processing accelerators (1200). Other
// vendors' VGA devices are mostly BMC graphics (ASPEED, Matrox) and are
// left out.
func isGPU(d facts.PCIDevice) bool {
	class := d.Class
	if len(class) < 4 {
		return false
	}
	switch {
	case class[:4] == "0302":
		return true
	case class[:2] == "03":
		return gpuVendors[d.Vendor] != ""
	case class[:4] == "1200":
		return d.Vendor == "1002"
	}
	return false
}

// confidentialCapable reports whether an NVIDIA device id is a Hopper
// (0x22F0-0x237F) or Blackwell (0x2900-0x297F) part.
func confidentialCapable(vendor, device string) bool {
	if vendor != "10de" {
		return false
	}
	id, err := strconv.ParseUint(device, 16, 16)
	if err != nil {
		return false
	}
	return (id >= 0x22f0 && id <= 0x237f) || (id >= 0x2900 && id <= 0x297f) || slices.Contains(ccCapableNVIDIA, id)
}

// isVFIODriver accepts vfio-pci and its vendor variants
// (nvgrace-gpu-vfio-pci, mlx5_vfio_pci ...).
func isVFIODriver(drv string) bool {
	return drv == "vfio-pci" || strings.HasSuffix(drv, "-vfio-pci") || strings.HasSuffix(drv, "_vfio_pci")
}

// isBridge is PCI class 0604 (PCI-to-PCI bridge, PCIe ports).
func isBridge(d facts.PCIDevice) bool { return strings.HasPrefix(d.Class, "0604") }

// gpus summarises the GPUs among devs. A GPU's IOMMU group is isolated
// when every other member is vfio-bound or a bridge; the others are listed.
func gpus(devs []facts.PCIDevice) []facts.GPU {
	// Indices, not copies: a big host has thousands of functions, and a
	// PCIDevice is a few hundred bytes. Only the GPUs' groups are
	// gathered: on such a host most functions have a group of their own.
	byGroup := map[int][]int{}
	for i := range devs {
		if d := &devs[i]; d.IOMMUGroup != nil && isGPU(*d) {
			byGroup[*d.IOMMUGroup] = nil
		}
	}
	if len(byGroup) > 0 {
		for i := range devs {
			if d := &devs[i]; d.IOMMUGroup != nil {
				if m, ok := byGroup[*d.IOMMUGroup]; ok {
					byGroup[*d.IOMMUGroup] = append(m, i)
				}
			}
		}
	}
	var out []facts.GPU
	for i := range devs {
		d := &devs[i]
		if !isGPU(*d) {
			continue
		}
		g := facts.GPU{
			Address:             d.Address,
			Vendor:              gpuVendors[d.Vendor],
			Model:               d.DeviceName,
			DeviceID:            d.Device,
			ConfidentialCapable: confidentialCapable(d.Vendor, d.Device),
			Driver:              d.Driver,
			VFIOBound:           isVFIODriver(d.Driver),
			IOMMUGroup:          d.IOMMUGroup,
			PhysFn:              d.PhysFn,
			SRIOVTotalVFs:       d.SRIOVTotal,
			SRIOVNumVFs:         d.SRIOVNum,
			VGPUTypes:           d.VGPUTypes,
		}
		if g.Vendor == "" {
			g.Vendor = d.Vendor
		}
		if d.IOMMUGroup != nil {
			isolated := true
			for _, j := range byGroup[*d.IOMMUGroup] {
				m := &devs[j]
				if m.Address == d.Address || isVFIODriver(m.Driver) || isBridge(*m) {
					continue
				}
				isolated = false
				g.GroupMembers = append(g.GroupMembers, m.Address)
			}
			g.GroupIsolated = &isolated
		}
		out = append(out, g)
	}
	return out
}
