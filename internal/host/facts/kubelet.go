package facts

// Kubelet is what discovery read of the kubelet's own configuration, from
// the files and flags of the detected distribution (or the running
// kubelet's command line). It stays small: only what a check judges, and
// nothing at all on the common node that leaves everything at Kubernetes'
// defaults (the section is then omitted; an unreadable configuration is
// listed in Unknown instead).
type Kubelet struct {
	// RuntimeRequestTimeout is the kubelet's runtimeRequestTimeout
	// (--runtime-request-timeout) as the kubelet runs with it, in Go's
	// duration form ("10m0s"); empty when nothing sets it, so that
	// Kubernetes' default of 2m0s applies.
	RuntimeRequestTimeout string `json:"runtimeRequestTimeout,omitempty"`
	// RuntimeRequestTimeoutSource says where the value came from: a file
	// and line with the key or flag that set it
	// ("etc/rancher/k3s/config.yaml:4 kubelet-arg runtime-request-timeout")
	// or the running kubelet's command line
	// ("proc/1234/cmdline --runtime-request-timeout").
	RuntimeRequestTimeoutSource string `json:"runtimeRequestTimeoutSource,omitempty"`
}

// KubeletDefaultRuntimeRequestTimeout is the kubelet's runtimeRequestTimeout
// when nothing sets it: the KubeletConfiguration v1beta1 default, 2m0s.
const KubeletDefaultRuntimeRequestTimeout = "2m0s"
