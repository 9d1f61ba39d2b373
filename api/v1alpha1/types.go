package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits that keep a NodeReport small. The CRD schema enforces the same
// numbers (a test checks they agree), so an agent must trim before writing.
const (
	// MaxPlatforms caps Report.Platforms. A node is evaluated against the
	// platforms of its own distribution, about 35 without debug variants.
	MaxPlatforms = 128
	// MaxFindings caps Report.Findings; Report.FindingsOmitted counts the rest.
	MaxFindings = 32
	// MaxGPUs caps Facts.GPUs.
	MaxGPUs = 16
	// MaxGPUResources caps Report.GPUResources: a node's device plugins
	// advertise one to three NVIDIA resources (the GPUs, per model or as
	// nvidia.com/pgpu, and the NVSwitches).
	MaxGPUResources = 4
	// MaxGPUResourceName caps GPUResource.Name: "nvidia.com/" and the 63
	// characters a resource name may have after its prefix.
	MaxGPUResourceName = len("nvidia.com/") + 63
	// MaxTextLen caps free-text fields (finding messages and remedies); the
	// agent cuts longer text and ends it with "…".
	MaxTextLen = 256
	// MaxNameLen caps identifiers and short values (versions, models, IDs).
	MaxNameLen = 128
	// MaxInstallPlatforms caps InstallStatus.Platforms: an operator installs
	// a handful of platforms on a node, not every one the node can run.
	MaxInstallPlatforms = 16
	// MaxInstallBytes caps the compact JSON of Report.Install, so that the
	// largest report of the fixture hosts with a worst-case install status
	// (and, on a GPU node, the GPU resources an HGX node advertises) still
	// stays under 8 KiB; entries past it are counted in
	// InstallStatus.PlatformsOmitted, failed ones kept first.
	MaxInstallBytes = 1200
	// InstallStatusSchema is the version of the InstallStatusAnnotation's
	// JSON: a reader refuses a record of another version rather than
	// misreading it.
	InstallStatusSchema = 1
)

// InstallStatusAnnotation is the Node annotation in which the
// node-installer records its last run (an InstallStatus with the field
// "schema": InstallStatusSchema, as compact JSON); the agent copies it into
// Report.Install. The node-installer writes it there, and not in the
// NodeReport, because its Node is the one object its admission policy
// already lets it write: the agent stays the NodeReport's only writer.
const InstallStatusAnnotation = LabelPrefix + "install-status"

// NodeReport is berth's verdict for one node: a summary of what discovery
// found, which platforms the node can run and, for those it cannot, the first
// blocker and the failing and warning findings with their remedies.
//
// It is cluster-scoped, named after its node and owned by it (an
// ownerReference to the v1 Node), so deleting a node garbage-collects its
// report. There is no spec/status split and no status subresource: the agent
// owns the whole object and writes it with server-side apply (field manager
// FieldManager), which a status subresource would split into two requests
// and two RBAC rules.
type NodeReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Report is the content the agent publishes.
	Report Report `json:"report"`
	// Status holds the node's conditions, for `kubectl wait
	// --for=condition=Installed nodereport/<node>`.
	Status NodeReportStatus `json:"status,omitempty"`
}

// NodeReportStatus is the part of a NodeReport that tools wait on. It is
// an ordinary field, not a status subresource: the agent writes the whole
// object in one apply (see NodeReport).
type NodeReportStatus struct {
	// Conditions are the node's standard conditions: Ready, Installed and
	// Degraded (ConditionReady and the others), each with a reason. A
	// condition's lastTransitionTime changes only when its status does.
	// observedGeneration is left unset: the report has no spec whose
	// generation a condition could follow, and every write of the agent
	// raises metadata.generation, which kubectl wait would take for a
	// condition not yet observed.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// The condition types of NodeReportStatus.Conditions.
const (
	// ConditionReady is True when the node can run at least one
	// requested platform: one the node-installer was asked to install
	// (Report.Install), or, without an install record, any evaluated one.
	ConditionReady = "Ready"
	// ConditionInstalled is True when every requested platform is
	// installed and its handler proven live.
	ConditionInstalled = "Installed"
	// ConditionDegraded is True when a platform that worked fails: one
	// installed that now fails its checks, or an install that failed
	// after the node was Installed.
	ConditionDegraded = "Degraded"
)

// MaxConditions caps NodeReportStatus.Conditions.
const MaxConditions = 8

// NodeReportList is a list of NodeReports.
type NodeReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the reports.
	Items []NodeReport `json:"items"`
}

// Report is the content of a NodeReport.
type Report struct {
	// NodeName is the node the report describes (also the object's name).
	NodeName string `json:"nodeName"`
	// BerthVersion is the version of the agent that wrote the report.
	BerthVersion string `json:"berthVersion"`
	// ContentHash is "sha256:" and the hex SHA-256 of the canonical JSON of
	// the report with ContentHash and ObservedAt cleared: it changes only when
	// the content does, so the agent can skip writes and fleet tooling can
	// group identical nodes.
	ContentHash string `json:"contentHash"`
	// ObservedAt is when discovery ran. It is not part of ContentHash.
	ObservedAt metav1.Time `json:"observedAt"`
	// Summary counts the platform verdicts (printed by kubectl get).
	Summary Summary `json:"summary"`
	// Facts is a summary of the discovered host facts.
	Facts FactsSummary `json:"facts"`
	// Platforms holds one verdict per evaluated platform, keyed by name.
	Platforms []PlatformVerdict `json:"platforms,omitempty"`
	// Findings are the failing and warning findings (passing ones are not
	// reported), most severe first, at most MaxFindings.
	Findings []Finding `json:"findings,omitempty"`
	// FindingsOmitted counts failing and warning findings left out of
	// Findings to respect MaxFindings.
	FindingsOmitted int32 `json:"findingsOmitted,omitempty"`
	// Install is what the node-installer last did on the node, copied from
	// the Node's InstallStatusAnnotation; absent when no node-installer ran
	// there (or its record could not be read: the agent logs why). It is
	// optional, so adding it kept v1alpha1: older agents leave it out and
	// older readers ignore it.
	Install *InstallStatus `json:"install,omitempty"`
	// GPUResources are the NVIDIA device plugin resources in the Node's
	// allocatable (nvidia.com/pgpu or a per-model name such as
	// nvidia.com/GH100_H100_PCIE from the GPU operator's sandbox device
	// plugin; nvidia.com/gpu from its container device plugin), sorted by
	// name, at most MaxGPUResources. The agent reads them only on a node
	// with a GPU; optional, so adding it kept v1alpha1.
	GPUResources []GPUResource `json:"gpuResources,omitempty"`
}

// GPUResource is one extended resource in the Node's allocatable.
type GPUResource struct {
	// Name is the resource name ("nvidia.com/pgpu").
	Name string `json:"name"`
	// Allocatable is how many the node can hand out.
	Allocatable int32 `json:"allocatable"`
}

// InstallState is the outcome of installing one platform on a node.
type InstallState string

// The install states, as written in the API (the CRD enumerates exactly
// these).
const (
	// InstallInstalled: installed, configured and its handler live.
	InstallInstalled InstallState = "installed"
	// InstallNotReady: the preflight found the node not ready for the
	// platform, so nothing was installed for it.
	InstallNotReady InstallState = "not-ready"
	// InstallFailed: the node was ready but installing failed.
	InstallFailed InstallState = "failed"
)

// InstallStatus is the node-installer's last run on the node. One run
// installs every chosen platform from one release manifest, so the
// manifest's version and digest are the run's, not each platform's.
type InstallStatus struct {
	// Version is the version of the release manifest installed from.
	Version string `json:"version,omitempty"`
	// Digest is the release manifest's digest ("sha256:..."), which pins
	// the exact release when versions are reused.
	Digest string `json:"digest,omitempty"`
	// Time is when the run ended with this outcome (unchanged by reruns
	// with the same outcome).
	Time metav1.Time `json:"time"`
	// Platforms holds one outcome per chosen platform, failed first, then
	// not-ready, then installed.
	Platforms []PlatformInstall `json:"platforms,omitempty"`
	// PlatformsOmitted counts outcomes left out of Platforms to respect
	// MaxInstallPlatforms and MaxInstallBytes.
	PlatformsOmitted int32 `json:"platformsOmitted,omitempty"`
}

// PlatformInstall is the outcome of installing one platform.
type PlatformInstall struct {
	// Name is the platform's Kubernetes name.
	Name string `json:"name"`
	// Handler is the platform's RuntimeClass handler.
	Handler string `json:"handler,omitempty"`
	// State is installed, not-ready or failed.
	State InstallState `json:"state"`
	// Error says why the platform is not-ready or failed, at most
	// MaxTextLen bytes (cut text ends with "…").
	Error string `json:"error,omitempty"`
}

// Summary counts the platforms by verdict.
type Summary struct {
	// Ready counts platforms with verdict ready.
	Ready int32 `json:"ready"`
	// Warn counts platforms with verdict warn (can run, with caveats).
	Warn int32 `json:"warn"`
	// NotReady counts platforms with verdict notReady.
	NotReady int32 `json:"notReady"`
}

// Verdict is a platform's overall outcome on a node.
type Verdict string

// The verdicts, as written in the API (the CRD enumerates exactly these).
const (
	VerdictReady    Verdict = "ready"
	VerdictWarn     Verdict = "warn"
	VerdictNotReady Verdict = "notReady"
)

// PlatformVerdict is the outcome of one platform on the node.
type PlatformVerdict struct {
	// Name is the platform's Kubernetes name (platform.Platform.Name()).
	Name string `json:"name"`
	// Verdict is ready, warn or notReady.
	Verdict Verdict `json:"verdict"`
	// FirstBlocker is the ID of the first failing check when the verdict is
	// notReady, so an operator sees the reason without the full findings.
	FirstBlocker string `json:"firstBlocker,omitempty"`
}

// FindingStatus is the status of a reported finding; only fail and warn
// findings are reported.
type FindingStatus string

// The reported finding statuses.
const (
	FindingFail FindingStatus = "fail"
	FindingWarn FindingStatus = "warn"
)

// Finding is one failing or warning check outcome.
type Finding struct {
	// ID is the check ID (e.g. "tee.snp.firmware").
	ID string `json:"id"`
	// Status is fail or warn.
	Status FindingStatus `json:"status"`
	// Message says what is wrong, at most MaxTextLen bytes.
	Message string `json:"message"`
	// Remedy says how to fix it, at most MaxTextLen bytes.
	Remedy string `json:"remedy,omitempty"`
}

// FactsSummary is the part of the discovered facts an operator needs to
// compare nodes; the full facts stay on the node (`berth facts`).
type FactsSummary struct {
	// CPU identifies the processor.
	CPU CPUSummary `json:"cpu"`
	// Virt says whether the node is itself a virtual machine.
	Virt VirtSummary `json:"virt"`
	// KernelRelease is uname -r.
	KernelRelease string `json:"kernelRelease,omitempty"`
	// OS is the os-release PRETTY_NAME (or ID VERSION_ID).
	OS string `json:"os,omitempty"`
	// Distribution is the detected Kubernetes distribution (platform name).
	Distribution string `json:"distribution,omitempty"`
	// Runtimes holds the container runtime versions.
	Runtimes RuntimeVersions `json:"runtimes"`
	// Hypervisors holds the VMM versions found on the node.
	Hypervisors HypervisorVersions `json:"hypervisors"`
	// KVMUsable is true when /dev/kvm exists and KVM_CREATE_VM succeeds.
	KVMUsable bool `json:"kvmUsable"`
	// IOMMUGroups counts /sys/kernel/iommu_groups entries (0: IOMMU off).
	IOMMUGroups int32 `json:"iommuGroups"`
	// TEE summarises the confidential-computing state.
	TEE TEESummary `json:"tee"`
	// GPUs lists the accelerators, at most MaxGPUs.
	GPUs []GPUSummary `json:"gpus,omitempty"`
	// Modules records whether key kernel modules are loaded or built in.
	Modules ModuleSummary `json:"modules"`
	// Unknown counts facts discovery could not determine.
	Unknown int32 `json:"unknown,omitempty"`
}

// CPUSummary identifies the processor.
type CPUSummary struct {
	// Vendor is the cpuinfo vendor_id (AuthenticAMD, GenuineIntel).
	Vendor string `json:"vendor,omitempty"`
	// Model is the cpuinfo model name.
	Model string `json:"model,omitempty"`
	// ProductLine is the AMD EPYC product line (milan, genoa, turin) when known.
	ProductLine string `json:"productLine,omitempty"`
}

// VirtSummary says whether the node is a guest and of which hypervisor.
type VirtSummary struct {
	// Guest is true when the node runs inside a virtual machine.
	Guest bool `json:"guest"`
	// Hypervisor names the hypervisor the node runs on, when a guest.
	Hypervisor string `json:"hypervisor,omitempty"`
}

// RuntimeVersions holds container runtime versions ("" when absent).
type RuntimeVersions struct {
	// Containerd is the containerd version.
	Containerd string `json:"containerd,omitempty"`
	// CRIO is the CRI-O version.
	CRIO string `json:"crio,omitempty"`
}

// HypervisorVersions holds VMM versions ("" when absent).
type HypervisorVersions struct {
	// QEMU is the qemu-system version.
	QEMU string `json:"qemu,omitempty"`
	// CloudHypervisor is the cloud-hypervisor version.
	CloudHypervisor string `json:"cloudHypervisor,omitempty"`
	// Firecracker is the firecracker version.
	Firecracker string `json:"firecracker,omitempty"`
}

// TEESummary summarises the host's TEE state; nil members mean the
// technology is absent.
type TEESummary struct {
	// SNP is the AMD SEV-SNP state.
	SNP *SNPSummary `json:"snp,omitempty"`
	// TDX is the Intel TDX state.
	TDX *TDXSummary `json:"tdx,omitempty"`
}

// SNPSummary is the AMD SEV-SNP host state.
type SNPSummary struct {
	// Enabled is true when the kernel reports SEV-SNP enabled.
	Enabled bool `json:"enabled"`
	// FirmwareVersion is the SEV firmware version (major.minor).
	FirmwareVersion string `json:"firmwareVersion,omitempty"`
	// SNPASIDs is the number of ASIDs reserved for SNP guests.
	SNPASIDs int32 `json:"snpAsids,omitempty"`
}

// TDXSummary is the Intel TDX host state.
type TDXSummary struct {
	// ModuleInitialized is true when the TDX module is initialised.
	ModuleInitialized bool `json:"moduleInitialized"`
	// ModuleVersion is the TDX module version.
	ModuleVersion string `json:"moduleVersion,omitempty"`
}

// GPUSummary describes one accelerator.
type GPUSummary struct {
	// Model is the device name (or vendor:device IDs when unnamed).
	Model string `json:"model"`
	// VFIO is true when the device is bound to vfio-pci.
	VFIO bool `json:"vfio"`
	// Isolated is true when the device's IOMMU group holds nothing else
	// that would have to be passed through with it.
	Isolated bool `json:"isolated"`
	// ConfidentialCapable is true when the GPU supports confidential
	// computing (e.g. NVIDIA Hopper CC mode).
	ConfidentialCapable bool `json:"confidentialCapable"`
	// CCMode is the GPU's confidential-computing mode as its firmware
	// holds it: on, off, devtools, or ppcie (protected PCIe, HGX boards);
	// empty when it is not known or the GPU has none.
	CCMode string `json:"ccMode,omitempty"`
}

// ModuleSummary records key kernel modules (loaded or built in).
type ModuleSummary struct {
	// KVM is kvm (with kvm_amd or kvm_intel).
	KVM bool `json:"kvm"`
	// VhostVsock is vhost_vsock (the Kata agent channel).
	VhostVsock bool `json:"vhostVsock"`
	// VhostNet is vhost_net.
	VhostNet bool `json:"vhostNet"`
	// VFIOPCI is vfio_pci (device passthrough).
	VFIOPCI bool `json:"vfioPci"`
}
