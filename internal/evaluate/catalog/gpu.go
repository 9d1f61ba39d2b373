package catalog

import (
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

// nvidiaGPUs returns the NVIDIA GPUs (the ones Kata's GPU platforms use).
func nvidiaGPUs(f *facts.Facts) []facts.GPU {
	var out []facts.GPU
	for _, g := range f.GPUs {
		if g.Vendor == "nvidia" || g.Vendor == "10de" {
			out = append(out, g)
		}
	}
	return out
}

func gpuName(g facts.GPU) string {
	return g.Address + " " + orDefault(g.Model, "10de:"+g.DeviceID)
}

func gpuChecks() []check.Check {
	return nodeArea([]check.Check{{
		ID:        "gpu.present",
		Title:     "for an NVIDIA GPU",
		Why:       "The GPU platforms pass a whole NVIDIA GPU into each sandbox VM.",
		Reads:     []string{"gpus"},
		Platforms: "gpu platforms",
		Remedies:  []string{"use a node with an NVIDIA data-centre GPU, or a platform without +gpu"},
		Applies:   check.When(check.Blocking, isGPU),
		Run: func(f *facts.Facts) check.Result {
			gs := nvidiaGPUs(f)
			if len(gs) == 0 {
				return check.Failed("no NVIDIA GPU found", "use a node with an NVIDIA GPU or choose a platform without +gpu", check.Ev("gpus", len(f.GPUs)))
			}
			names := make([]string, len(gs))
			for i, g := range gs {
				names[i] = gpuName(g)
			}
			return check.Ok(strings.Join(names, ", "), check.Ev("gpus", len(gs)))
		},
	}, {
		ID:        "gpu.iommu.group",
		Title:     "if the GPU's IOMMU group is isolated",
		Why:       "VFIO passes whole IOMMU groups: every other device in the GPU's group must be bound to vfio-pci too (or be a bridge), or the VM cannot start.",
		Parent:    "gpu.present",
		Reads:     []string{"gpus"},
		Platforms: "gpu platforms",
		Remedies:  []string{"bind the other devices of the group to vfio-pci, move the GPU to another slot, or enable ACS in the BIOS"},
		Applies:   check.When(check.Blocking, isGPU),
		Run: func(f *facts.Facts) check.Result {
			var bad []string
			for _, g := range nvidiaGPUs(f) {
				switch {
				case g.GroupIsolated == nil:
					// The IOMMU is off (iommu.enabled, which comes first,
					// reports it): there is no group to judge yet.
					return check.Unsure("cannot tell: "+g.Address+" has no IOMMU group because the IOMMU is off (see iommu.enabled)", check.Ev("gpus.iommuGroup", g.IOMMUGroup))
				case *g.GroupIsolated:
					return check.Ok(g.Address+" is alone in IOMMU group "+itoa(derefInt(g.IOMMUGroup)), check.Ev("gpus.groupIsolated", true))
				}
				bad = append(bad, g.Address+" shares group "+itoa(derefInt(g.IOMMUGroup))+" with "+strings.Join(g.GroupMembers, ", "))
			}
			return check.Failed(strings.Join(bad, "; "),
				"bind the other devices of the group to vfio-pci, move the GPU to another slot, or enable ACS in the BIOS", check.Ev("gpus.groupIsolated", false))
		},
	}, {
		ID:        "gpu.vfio",
		Title:     "if a GPU is bound to vfio-pci",
		Why:       "A GPU can only be passed to a VM when the host driver lets go of it and vfio-pci owns it.",
		Parent:    "gpu.present",
		Reads:     []string{"gpus"},
		Platforms: "gpu platforms",
		Remedies:  []string{"bind the GPU to vfio-pci: driverctl set-override <BDF> vfio-pci (or vfio-pci.ids=10de:<device> on the kernel command line) and make sure the nvidia driver does not claim it first"},
		Applies:   check.When(check.Blocking, isGPU),
		Run: func(f *facts.Facts) check.Result {
			var bound, other []string
			for _, g := range nvidiaGPUs(f) {
				if g.VFIOBound {
					bound = append(bound, g.Address)
				} else {
					other = append(other, g.Address+" ("+orDefault(g.Driver, "no driver")+")")
				}
			}
			ev := []check.Evidence{check.Ev("gpus.vfioBound", bound), check.Ev("gpus.driver", other)}
			if len(bound) == 0 && noIOMMUGroup(f) {
				// vfio-pci cannot take a device without an IOMMU group:
				// the binding is a symptom of iommu.enabled.
				return check.Unsure("cannot tell: no GPU has an IOMMU group (the IOMMU is off, see iommu.enabled), and vfio-pci binds only devices in one", ev...)
			}
			if len(bound) == 0 {
				return check.Failed("no GPU is bound to vfio-pci: "+strings.Join(other, ", "),
					"driverctl set-override "+strings.Fields(other[0])[0]+" vfio-pci (or vfio-pci.ids=10de:<device> on the kernel command line)", ev...)
			}
			return check.Ok(strings.Join(bound, ", ")+" on vfio-pci", ev...)
		},
	}, {
		ID:        "gpu.confidential",
		Title:     "for a confidential-computing capable GPU",
		Why:       "Confidential GPU platforms need a GPU with a confidential-computing mode (NVIDIA Hopper or Blackwell); older GPUs cannot protect the guest's data.",
		Parent:    "gpu.present",
		Reads:     []string{"gpus"},
		Platforms: "confidential gpu platforms",
		Remedies:  []string{"use an NVIDIA H100/H200/H800/H20/GH200 or B200 GPU, or a non-confidential GPU platform"},
		Applies:   check.When(check.Blocking, isConfidentialGPU),
		Run: func(f *facts.Facts) check.Result {
			var models []string
			for _, g := range nvidiaGPUs(f) {
				if g.ConfidentialCapable {
					return check.Ok(gpuName(g)+" supports confidential computing", check.Ev("gpus.confidentialCapable", true))
				}
				models = append(models, gpuName(g))
			}
			return check.Failed("no confidential-computing capable GPU: "+strings.Join(models, ", "),
				"use an NVIDIA Hopper (H100, H200, H800, H20, GH200) or Blackwell (B200) GPU", check.Ev("gpus.confidentialCapable", false))
		},
	}})
}

// noIOMMUGroup reports whether no NVIDIA GPU is in an IOMMU group.
func noIOMMUGroup(f *facts.Facts) bool {
	for _, g := range nvidiaGPUs(f) {
		if g.IOMMUGroup != nil {
			return false
		}
	}
	return true
}

func derefInt(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}
