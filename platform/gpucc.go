package platform

// NVIDIACCReadyLabel is the node label the NVIDIA GPU operator's cc-manager
// sets to "true" once a node's GPUs are in the confidential-computing mode
// the node asked for (nvidia.com/cc.mode); kata-deploy 4.1's confidential
// GPU shims select on it (values.yaml, shims.qemu-nvidia-gpu-snp/-tdx
// .runtimeClass.nodeSelector).
const NVIDIACCReadyLabel = "nvidia.com/cc.ready.state"

// ReadySelector returns the node selector every RuntimeClass of p carries
// besides berth's own label: for a confidential GPU platform the GPU
// operator's readiness label, as kata-deploy's classes select it, since the
// GPU operator's sandbox device plugin is what hands such a pod its GPU.
// Nil for every other platform.
func (p Platform) ReadySelector() map[string]string {
	p.must()
	if p.gpu && p.tee != NoTEE {
		return map[string]string{NVIDIACCReadyLabel: "true"}
	}
	return nil
}

// GPUGuest returns the file names of the guest kernel and image that the
// Kata 4.1 template of a GPU platform's shim boots
// (configuration-qemu-nvidia-gpu*.toml.in filled with the Makefile's
// KERNELNAME_NV and IMAGENAME_NV*): NVIDIA's guest kernel, and the image
// with NVIDIA's guest driver (the confidential one, with the attestation
// agent, for a TEE; runtime-rs boots one base image and adds the GPU as an
// extension image). ok is false for a platform without a GPU. The
// configure package's conformance test holds them to the templates.
func (p Platform) GPUGuest() (kernel, image string, ok bool) {
	p.must()
	if !p.gpu {
		return "", "", false
	}
	switch {
	case p.rt == RustRuntime:
		image = "kata-containers-nvidia.img"
	case p.tee != NoTEE:
		image = "kata-containers-nvidia-gpu-confidential.img"
	default:
		image = "kata-containers-nvidia-gpu.img"
	}
	return "vmlinuz-nvidia-gpu.container", image, true
}
