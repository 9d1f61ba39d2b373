package catalog

import (
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

// vgpuRemedy is what turns a vGPU-mode GPU back into one that can be
// passed through whole.
const vgpuRemedy = "give Kata a GPU without vGPU: disable the virtual functions (/usr/lib/nvidia/sriov-manage -d <BDF>) or remove the NVIDIA vGPU manager, then bind the GPU to vfio-pci; with the NVIDIA GPU operator label the node nvidia.com/gpu.workload.config=vm-passthrough instead of vm-vgpu"

// vgpuMode says why g is set up for NVIDIA vGPU, or "" when it is not:
// the vGPU host driver offers vGPU types on it (mdev types before Ampere)
// or has enabled its SR-IOV virtual functions (Ampere and later, where
// each VF carries the vGPU types).
func vgpuMode(g facts.GPU) string {
	var why []string
	if len(g.VGPUTypes) > 0 {
		why = append(why, fmt.Sprintf("%d vGPU types offered", len(g.VGPUTypes)))
	}
	if g.SRIOVNumVFs != nil && *g.SRIOVNumVFs > 0 {
		why = append(why, fmt.Sprintf("%d of %d SR-IOV virtual functions enabled", *g.SRIOVNumVFs, derefInt(g.SRIOVTotalVFs)))
	}
	return strings.Join(why, ", ")
}

func vgpuChecks() []check.Check {
	return nodeArea([]check.Check{{
		ID:    "gpu.vgpu",
		Title: "if the GPU is not split into vGPUs",
		Why: "The Kata GPU platforms give each sandbox a whole physical GPU through vfio-pci. A GPU the NVIDIA vGPU host driver has " +
			"split into vGPUs (mdev types, or SR-IOV virtual functions with creatable vGPU types) belongs to that driver and cannot be " +
			"passed through whole; its virtual functions are vGPU slices, not GPUs.",
		Parent:    "gpu.present",
		Reads:     []string{"gpus"},
		Platforms: "gpu platforms",
		Remedies:  []string{vgpuRemedy},
		Applies:   check.When(check.Blocking, isGPU),
		Run: func(f *facts.Facts) check.Result {
			var whole, split, vfs []string
			for _, g := range nvidiaGPUs(f) {
				switch why := vgpuMode(g); {
				case g.PhysFn != "":
					vfs = append(vfs, g.Address)
				case why != "":
					split = append(split, g.Address+" ("+why+")")
				default:
					whole = append(whole, g.Address)
				}
			}
			ev := []check.Evidence{check.Ev("gpus.vgpuTypes", split), check.Ev("gpus.physfn", vfs)}
			switch {
			case len(whole) > 0 && len(split) > 0:
				return check.Ok(fmt.Sprintf("%s can be passed through; %s set up for vGPU", strings.Join(whole, ", "), strings.Join(split, "; ")), ev...)
			case len(whole) > 0:
				return check.Ok(strings.Join(whole, ", ")+" not set up for vGPU", ev...)
			case len(split) > 0:
				return check.Failed("every NVIDIA GPU is set up for vGPU: "+strings.Join(split, "; "), vgpuRemedy, ev...)
			}
			// Only virtual functions: the physical GPU was not listed.
			return check.Failed("only vGPU virtual functions found ("+strings.Join(vfs, ", ")+"), no whole GPU", vgpuRemedy, ev...)
		},
	}})
}

// gpuChecksWithVGPU is the GPU area with gpu.vgpu before gpu.vfio: whether
// the GPU is split into vGPUs decides whether it can be bound to vfio-pci
// at all (the vGPU host driver holds it while its virtual functions
// exist), so it is the blocker to name first.
func gpuChecksWithVGPU() []check.Check {
	gs := gpuChecks()
	i := slices.IndexFunc(gs, func(c check.Check) bool { return c.ID == "gpu.vfio" })
	if i < 0 {
		i = len(gs)
	}
	return append(slices.Insert(gs, i, vgpuChecks()...), gpuCCChecks()...)
}
