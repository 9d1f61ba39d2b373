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
