package platform

// KubeletRoot returns the kubelet's root directory (--root-dir) on d, as an
// absolute path on the node. Kata's cold plug of VFIO devices asks the
// kubelet's pod-resources API at <root>/pod-resources/kubelet.sock (Kata
// Containers 4.1 configuration-qemu-nvidia-gpu*.toml.in,
// pod_resource_api_sock; kubelet_root_dir notes "k0s: /var/lib/k0s/kubelet").
// MicroK8s keeps the kubelet under its snap's common directory, as its
// CSI driver guides tell (kubeletDir=/var/snap/microk8s/common/var/lib/kubelet).
// Every other distribution berth knows keeps the kubelet default.
func (d Distribution) KubeletRoot() string {
	switch d {
	case K0s:
		return "/var/lib/k0s/kubelet"
	case MicroK8s:
		return "/var/snap/microk8s/common/var/lib/kubelet"
	}
	return "/var/lib/kubelet"
}

// PodResourcesSocket returns the kubelet's pod-resources socket on d.
func (d Distribution) PodResourcesSocket() string {
	return d.KubeletRoot() + "/pod-resources/kubelet.sock"
}
