package nodereport

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/platform"
)

// GPUAllocatableID is the finding the agent adds when a GPU platform is
// ready on a node whose Node advertises no passthrough GPU: the host is
// set up, but a pod asking for nvidia.com/pgpu stays Pending. It is not a
// host check (berth check cannot see the Node), so only the agent
// reports it.
const GPUAllocatableID = "gpu.allocatable"

// nvidiaResourcePrefix is the resource domain of NVIDIA's device plugins.
const nvidiaResourcePrefix = "nvidia.com/"

// containerGPU is the resource of NVIDIA's container device plugin (GPUs
// on the nvidia driver, for runc pods): a node in vm-passthrough mode
// advertises its GPUs under another name.
const containerGPU = "nvidia.com/gpu"

// gpuAllocatableRemedy is how a node gets its passthrough GPUs advertised.
const gpuAllocatableRemedy = "deploy NVIDIA's GPU Operator with sandboxWorkloads.enabled=true and label the node " +
	"nvidia.com/gpu.workload.config=vm-passthrough: its sandbox device plugin advertises the GPUs on vfio-pci as nvidia.com/pgpu"

// GPUResources picks NVIDIA's device plugin resources from a Node's
// allocatable, sorted by name, at most MaxGPUResources.
func GPUResources(alloc corev1.ResourceList) []v1alpha1.GPUResource {
	var out []v1alpha1.GPUResource
	for name, q := range alloc {
		if !strings.HasPrefix(string(name), nvidiaResourcePrefix) || len(name) > v1alpha1.MaxGPUResourceName {
			// Kubernetes allows no longer name under the prefix.
			continue
		}
		n := q.Value()
		n = min(max(n, 0), 1<<31-1)
		out = append(out, v1alpha1.GPUResource{Name: string(name), Allocatable: int32(n)})
	}
	slices.SortFunc(out, func(a, b v1alpha1.GPUResource) int { return strings.Compare(a.Name, b.Name) })
	if len(out) > v1alpha1.MaxGPUResources {
		out = out[:v1alpha1.MaxGPUResources]
	}
	return out
}

// PassthroughGPU reports whether name is a resource that hands a pod a
// whole GPU for a VM: the sandbox device plugin's nvidia.com/pgpu, or the
// per-model name it uses without P_GPU_ALIAS (the device's pci.ids name
// in upper case, "nvidia.com/GH100_H100_PCIE"). NVSwitches get per-model
// names too, which name the switch.
func PassthroughGPU(name string) bool {
	class, ok := strings.CutPrefix(name, nvidiaResourcePrefix)
	return ok && name != containerGPU && !strings.HasPrefix(class, "mig-") && !strings.Contains(strings.ToUpper(class), "NVSWITCH")
}

// WithGPUResources returns r with the NVIDIA resources of the Node's
// allocatable and, when a GPU platform is ready or warned on the node but
// none of them hands out a passthrough GPU, the gpu.allocatable warning;
// ContentHash recomputed. Platform verdicts stay what the host checks
// said: the Node's allocatable comes from the cluster, not the host.
func WithGPUResources(r v1alpha1.Report, alloc corev1.ResourceList) v1alpha1.Report {
	r.GPUResources = GPUResources(alloc)
	r.Findings = slices.DeleteFunc(slices.Clone(r.Findings), func(f v1alpha1.Finding) bool { return f.ID == GPUAllocatableID })
	var ready []string
	for _, pv := range r.Platforms {
		p, err := platform.Parse(pv.Name)
		if err == nil && p.GPU() && (pv.Verdict == v1alpha1.VerdictReady || pv.Verdict == v1alpha1.VerdictWarn) {
			ready = append(ready, pv.Name)
		}
	}
	if len(ready) == 0 || slices.ContainsFunc(r.GPUResources, func(g v1alpha1.GPUResource) bool { return PassthroughGPU(g.Name) && g.Allocatable > 0 }) {
		r.ContentHash = Hash(r)
		return r
	}
	msg := ready[0] + " is ready but the Node's allocatable has no passthrough GPU (nvidia.com/pgpu or a per-model nvidia.com/ name): pods asking for one stay Pending"
	if slices.ContainsFunc(r.GPUResources, func(g v1alpha1.GPUResource) bool { return g.Name == containerGPU }) {
		msg = ready[0] + " is ready but the Node advertises its GPUs as nvidia.com/gpu (the container device plugin, GPUs on the nvidia driver), not nvidia.com/pgpu for VMs"
	}
	f := v1alpha1.Finding{ID: GPUAllocatableID, Status: v1alpha1.FindingWarn, Message: clip(msg, v1alpha1.MaxTextLen), Remedy: clip(gpuAllocatableRemedy, v1alpha1.MaxTextLen)}
	if len(r.Findings) < v1alpha1.MaxFindings {
		r.Findings = append(r.Findings, f)
	} else {
		r.FindingsOmitted++
	}
	r.ContentHash = Hash(r)
	return r
}
