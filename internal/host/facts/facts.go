// Package facts defines the document that discovery produces and checks
// consume: everything berth knows about one host, small, versioned and
// JSON-serialisable. A value that could not be determined is left empty
// (nil pointer, empty string) and listed in Unknown with the reason, so that
// a check can tell "absent" from "not known".
package facts

import (
	"sort"
	"strings"
	"time"
)

// SchemaVersion is bumped on every incompatible change to Facts.
const SchemaVersion = 1

// Reasons used in Unknown entries. Free text may follow after ": ".
const (
	ReasonOffline     = "offline root"
	ReasonMissing     = "missing"
	ReasonPermission  = "permission denied"
	ReasonUnparseable = "unparseable"
	ReasonNotRun      = "not run"
)

// Facts is all that was discovered about one host.
type Facts struct {
	SchemaVersion int       `json:"schemaVersion"`
	Root          string    `json:"root"`
	Live          bool      `json:"live"`
	CollectedAt   time.Time `json:"collectedAt"`

	CPU          CPU          `json:"cpu"`
	Virt         Virt         `json:"virt"`
	Kernel       Kernel       `json:"kernel"`
	Devices      Devices      `json:"devices"`
	IOMMU        IOMMU        `json:"iommu"`
	PCI          []PCIDevice  `json:"pci,omitempty"`
	GPUs         []GPU        `json:"gpus,omitempty"`
	NVSwitches   []NVSwitch   `json:"nvswitches,omitempty"`
	CDISpecs     []CDISpec    `json:"cdiSpecs,omitempty"`
	Memory       Memory       `json:"memory"`
	Cgroups      Cgroups      `json:"cgroups"`
	Limits       Limits       `json:"limits"`
	OS           OS           `json:"os"`
	TEE          TEE          `json:"tee"`
	Runtimes     Runtimes     `json:"runtimes"`
	Distribution Distribution `json:"distribution"`
	Kubelet      Kubelet      `json:"kubelet,omitzero"`
	Binaries     []Binary     `json:"binaries,omitempty"`
	QEMUProbe    *QEMUProbe   `json:"qemuProbe,omitempty"`
	Storage      Storage      `json:"storage"`
	Network      Network      `json:"network"`
	Plugins      Plugins      `json:"plugins,omitzero"`

	// Unknown lists every fact that could not be determined, by dotted
	// field path (as in the JSON document), with the reason.
	Unknown []Missing `json:"unknown,omitempty"`
}

// Missing records why one fact is unknown.
type Missing struct {
	// Field is the dotted JSON path of the fact, e.g. "tee.snp.firmwareVersion".
	Field string `json:"field"`
	// Reason starts with one of the Reason constants, optionally followed by
	// ": " and detail such as "proc/cpuinfo:12: expected key: value".
	Reason string `json:"reason"`
}

// UnknownReason returns why field (or a parent of it) is unknown.
func (f *Facts) UnknownReason(field string) (string, bool) {
	for _, m := range f.Unknown {
		// field is m.Field or below it, tested without building
		// m.Field+"." (checks ask this for every field they read, on
		// every platform).
		if strings.HasPrefix(field, m.Field) && (len(field) == len(m.Field) || field[len(m.Field)] == '.') {
			return m.Reason, true
		}
	}
	return "", false
}

// SortUnknown puts Unknown in a stable order so that documents diff cleanly.
func (f *Facts) SortUnknown() {
	sort.Slice(f.Unknown, func(i, j int) bool {
		if f.Unknown[i].Field != f.Unknown[j].Field {
			return f.Unknown[i].Field < f.Unknown[j].Field
		}
		return f.Unknown[i].Reason < f.Unknown[j].Reason
	})
}

// CPU describes the processor.
type CPU struct {
	Arch      string `json:"arch,omitempty"`
	VendorID  string `json:"vendorId,omitempty"` // GenuineIntel, AuthenticAMD
	Vendor    string `json:"vendor,omitempty"`   // intel, amd, other
	Family    *int   `json:"family,omitempty"`
	Model     *int   `json:"model,omitempty"`
	Stepping  *int   `json:"stepping,omitempty"`
	ModelName string `json:"modelName,omitempty"`
	// ProductLine is the server generation derived from family and model:
	// naples, rome, milan, genoa, bergamo, siena, turin; sapphire-rapids,
	// emerald-rapids, granite-rapids, sierra-forest; empty when not a known
	// server part.
	ProductLine string `json:"productLine,omitempty"`
	// Flags are the cpuinfo flags that matter to berth, sorted.
	Flags       []string `json:"flags,omitempty"`
	LogicalCPUs int      `json:"logicalCpus,omitempty"`
	// CPUID is the processor's own view on a live x86 host, to tell a flag
	// the kernel hid from one the CPU lacks.
	CPUID *CPUID `json:"cpuid,omitempty"`
}

// HasFlag reports whether cpuinfo listed flag.
func (c CPU) HasFlag(flag string) bool {
	for _, f := range c.Flags {
		if f == flag {
			return true
		}
	}
	return false
}

// CPUID is what the CPUID instruction reports on a live host.
type CPUID struct {
	// HypervisorVendor is the leaf 0x40000000 signature, empty on bare metal.
	HypervisorVendor string `json:"hypervisorVendor,omitempty"`
	// Features are the CPUID feature names that matter (VMX, SVM, SEV,
	// SEV_ES, SEV_SNP, TDX_GUEST, HYPERVISOR ...), sorted.
	Features []string `json:"features,omitempty"`
	// Recorded is true when the values come from a snapshot's recorded
	// probe rather than from executing CPUID now.
	Recorded bool `json:"recorded,omitempty"`
}

// Virt says whether this host is itself a virtual machine.
type Virt struct {
	// Guest is true in a VM, false on bare metal, nil when unknown.
	Guest *bool `json:"guest,omitempty"`
	// Hypervisor names the hypervisor under us when Guest: kvm, qemu,
	// microsoft, vmware, xen, firecracker, cloud-hypervisor, amazon,
	// google, virtualbox, bhyve, unknown.
	Hypervisor string `json:"hypervisor,omitempty"`
	// Evidence lists what the verdict rests on, e.g. "cpuinfo flag hypervisor".
	Evidence []string `json:"evidence,omitempty"`
	DMI      DMI      `json:"dmi,omitzero"`
	// SMBIOSVMBit is bit 4 of BIOS characteristics extension byte 2.
	SMBIOSVMBit       *bool  `json:"smbiosVmBit,omitempty"`
	SysHypervisorType string `json:"sysHypervisorType,omitempty"`
	// ACPIOEMID is the OEM ID of the ACPI tables ("FIRECK" in Firecracker
	// guests, which have ACPI but no DMI).
	ACPIOEMID string `json:"acpiOemId,omitempty"`
}

// DMI holds the identifying strings from sys/class/dmi/id.
type DMI struct {
	SysVendor   string `json:"sysVendor,omitempty"`
	ProductName string `json:"productName,omitempty"`
	BoardVendor string `json:"boardVendor,omitempty"`
	BIOSVendor  string `json:"biosVendor,omitempty"`
	BIOSVersion string `json:"biosVersion,omitempty"`
}

// Kernel describes the running kernel.
type Kernel struct {
	Release string `json:"release,omitempty"`
	Cmdline string `json:"cmdline,omitempty"`
	// Modules holds the modules that matter (kvm, kvm_amd, kvm_intel, vhost*,
	// vfio*, ccp, tun, ...), loaded or built in, by name.
	Modules map[string]Module `json:"modules,omitempty"`
	// Config holds the kernel-config options that matter, by name without
	// the CONFIG_ prefix: "y", "m", or "n" when the config was read but the
	// option is not set.
	Config       map[string]string `json:"config,omitempty"`
	ConfigSource string            `json:"configSource,omitempty"`
	// BootLog holds the boot-log lines that matter (kvm, SEV, TDX, IOMMU,
	// ccp, vfio), in order, without timestamps.
	BootLog       []string `json:"bootLog,omitempty"`
	BootLogSource string   `json:"bootLogSource,omitempty"`
}

// Module is one kernel module.
type Module struct {
	Loaded  bool `json:"loaded,omitempty"`
	Builtin bool `json:"builtin,omitempty"`
	// Params are the module's parameters from sys/module/<m>/parameters,
	// trimmed.
	Params map[string]string `json:"params,omitempty"`
}

// Present reports whether the module is loaded or built in.
func (m Module) Present() bool { return m.Loaded || m.Builtin }

// Devices describes device nodes and the live KVM probe.
type Devices struct {
	// Nodes are the device nodes that matter keyed by path relative to the
	// root ("dev/kvm", "dev/sev", "dev/vhost-vsock", ...); absent ones are
	// listed with Exists false.
	Nodes map[string]DeviceNode `json:"nodes,omitempty"`
	// KVM is the result of opening /dev/kvm on a live root.
	KVM *KVMProbe `json:"kvm,omitempty"`
}

// DeviceNode is one /dev entry.
type DeviceNode struct {
	Exists bool   `json:"exists"`
	Mode   string `json:"mode,omitempty"` // e.g. "crw-rw----"
	UID    *int   `json:"uid,omitempty"`
	GID    *int   `json:"gid,omitempty"`
	Group  string `json:"group,omitempty"`
	// Accessible is whether the invoking user can open it read-write (live
	// root only).
	Accessible *bool `json:"accessible,omitempty"`
}

// KVMProbe is the outcome of KVM_GET_API_VERSION and KVM_CREATE_VM.
type KVMProbe struct {
	Opened     bool   `json:"opened"`
	APIVersion int    `json:"apiVersion,omitempty"`
	CreateVM   bool   `json:"createVm"`
	Errno      string `json:"errno,omitempty"` // e.g. "EBUSY", "ENOENT", "EACCES"
	Error      string `json:"error,omitempty"`
	Recorded   bool   `json:"recorded,omitempty"`
}

// IOMMU describes the host's IOMMU.
type IOMMU struct {
	// ACPITable is "DMAR" (Intel) or "IVRS" (AMD) when present.
	ACPITable string `json:"acpiTable,omitempty"`
	// Groups is the number of IOMMU groups; 0 means the IOMMU is off.
	Groups int `json:"groups"`
	// CmdlineFlags are the IOMMU-related kernel parameters given
	// (intel_iommu=on, amd_iommu=on, iommu=pt ...).
	CmdlineFlags []string `json:"cmdlineFlags,omitempty"`
	// VFIODMAEntryLimit is vfio_iommu_type1's dma_entry_limit.
	VFIODMAEntryLimit *int `json:"vfioDmaEntryLimit,omitempty"`
}

// PCIDevice is one device from sys/bus/pci/devices.
type PCIDevice struct {
	Address    string   `json:"address"` // 0000:41:00.0
	Vendor     string   `json:"vendor"`  // 10de (lower-case hex, no 0x)
	Device     string   `json:"device"`  // 2330
	Class      string   `json:"class"`   // 030200
	VendorName string   `json:"vendorName,omitempty"`
	DeviceName string   `json:"deviceName,omitempty"`
	Driver     string   `json:"driver,omitempty"`
	IOMMUGroup *int     `json:"iommuGroup,omitempty"`
	NUMANode   *int     `json:"numaNode,omitempty"`
	SRIOVTotal *int     `json:"sriovTotalVfs,omitempty"`
	SRIOVNum   *int     `json:"sriovNumVfs,omitempty"`
	VGPUTypes  []string `json:"vgpuTypes,omitempty"`
	// PhysFn is the physical function's address when the device is an
	// SR-IOV virtual function (read for NVIDIA devices, whose vGPU
	// virtual functions are GPUs of their own).
	PhysFn string `json:"physfn,omitempty"`
}

// GPU summarises one GPU for passthrough decisions.
type GPU struct {
	Address  string `json:"address"`
	Vendor   string `json:"vendor"` // nvidia, amd, intel, or the hex id
	Model    string `json:"model,omitempty"`
	DeviceID string `json:"deviceId"`
	// ConfidentialCapable is true for models that support confidential
	// computing (NVIDIA Hopper, Blackwell).
	ConfidentialCapable bool   `json:"confidentialCapable"`
	Driver              string `json:"driver,omitempty"`
	VFIOBound           bool   `json:"vfioBound"`
	IOMMUGroup          *int   `json:"iommuGroup,omitempty"`
	// GroupIsolated is true when every other member of the IOMMU group is
	// bound to vfio-pci or is a PCI bridge; nil when there is no group.
	GroupIsolated *bool `json:"groupIsolated,omitempty"`
	// GroupMembers lists the other devices in the group that are neither
	// vfio-bound nor bridges.
	GroupMembers []string `json:"groupMembers,omitempty"`
	// PhysFn is set when this GPU is an SR-IOV virtual function (an NVIDIA
	// vGPU VF on Ampere and later): the physical GPU's address.
	PhysFn string `json:"physfn,omitempty"`
	// SRIOVTotalVFs and SRIOVNumVFs are the device's sriov_totalvfs and
	// sriov_numvfs; nil when it has no SR-IOV capability.
	SRIOVTotalVFs *int `json:"sriovTotalVfs,omitempty"`
	SRIOVNumVFs   *int `json:"sriovNumVfs,omitempty"`
	// VGPUTypes are the vGPU types the NVIDIA vGPU host driver offers on
	// this device (mdev types before Ampere, creatable_vgpu_types on
	// the virtual functions after): a sign the GPU is set up for vGPU.
	VGPUTypes []string `json:"vgpuTypes,omitempty"`
	// CCMode is the GPU's confidential-computing mode as its firmware
	// holds it in a BAR0 register (the register NVIDIA's gpu-admin-tools
	// read for --query-cc-mode): "on", "off" or "devtools". Empty when
	// the GPU has no CC mode (not Hopper or Blackwell) or when it is not
	// known; the reason is then in Unknown under gpus[<address>].ccMode.
	CCMode string `json:"ccMode,omitempty"`
	// PPCIeMode is the protected-PCIe mode of a Hopper GPU (multi-GPU
	// passthrough with NVSwitches): "on" or "off"; empty as CCMode.
	PPCIeMode string `json:"ppcieMode,omitempty"`
	// VBIOS is the video BIOS version the nvidia driver reports in
	// /proc/driver/nvidia/gpus/<address>/information ("96.00.5e.00.01");
	// empty when the GPU is on another driver (the kernel shows it
	// nowhere else) or the driver could not read it.
	VBIOS string `json:"vbios,omitempty"`
}

// NVSwitch is one NVIDIA NVSwitch (HGX boards): with PPCIe the GPUs and
// the switches between them are passed to one confidential VM together.
type NVSwitch struct {
	Address  string `json:"address"`
	DeviceID string `json:"deviceId"`
	Driver   string `json:"driver,omitempty"`
	// Generation is "ls10" (NVSwitch 3, HGX H100/H200) or "lr10"
	// (NVSwitch 2, HGX A100).
	Generation string `json:"generation"`
	// PPCIeMode is "on" or "off" as the switch's BAR0 holds it (NVSwitch 3
	// only); empty when not known (reason in Unknown under
	// nvswitches[<address>].ppcieMode) or not applicable.
	PPCIeMode string `json:"ppcieMode,omitempty"`
}

// CDISpec is one Container Device Interface specification file in the
// directories containerd and CRI-O read by default (/etc/cdi,
// /var/run/cdi). A device plugin that hands out CDI devices (NVIDIA's
// sandbox device plugin: nvidia.com/pgpu) writes one per device kind; a
// runtime with CDI on refuses a container whose device has no spec.
type CDISpec struct {
	// Path is the file, relative to the root as every path in the facts.
	Path string `json:"path"`
	// Kind is the spec's "vendor/class" ("nvidia.com/pgpu").
	Kind string `json:"kind,omitempty"`
	// Error says why the file was not read or its kind not found, naming
	// the line; the runtime skips such a file.
	Error string `json:"error,omitempty"`
}

// Memory describes host memory.
type Memory struct {
	TotalKiB     uint64     `json:"totalKiB,omitempty"`
	AvailableKiB uint64     `json:"availableKiB,omitempty"`
	HugePages    []HugePage `json:"hugePages,omitempty"`
	NUMANodes    int        `json:"numaNodes,omitempty"`
}

// HugePage is one huge-page pool.
type HugePage struct {
	SizeKiB uint64 `json:"sizeKiB"`
	Total   uint64 `json:"total"`
	Free    uint64 `json:"free"`
}

// Cgroups describes the cgroup hierarchy.
type Cgroups struct {
	Version     int      `json:"version,omitempty"` // 1 or 2
	Controllers []string `json:"controllers,omitempty"`
	// MiscCapacity is sys/fs/cgroup/misc.capacity: sev, sev_es, tdx, ...
	MiscCapacity map[string]int64 `json:"miscCapacity,omitempty"`
}

// Limits are kernel limits that sandboxes hit.
type Limits struct {
	InotifyMaxUserInstances *int `json:"inotifyMaxUserInstances,omitempty"`
	InotifyMaxUserWatches   *int `json:"inotifyMaxUserWatches,omitempty"`
}

// OS is the operating system from os-release.
type OS struct {
	ID         string `json:"id,omitempty"`
	VersionID  string `json:"versionId,omitempty"`
	PrettyName string `json:"prettyName,omitempty"`
}

// TEE groups the confidential-computing facts.
type TEE struct {
	SNP SNP `json:"snp"`
	TDX TDX `json:"tdx"`
	SGX SGX `json:"sgx"`
}

// Range is an inclusive range of integers, e.g. ASIDs 1-99.
type Range struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// SNP holds the AMD SEV-SNP host facts.
type SNP struct {
	// KVM parameters of kvm_amd: sev, sev_es, sev_snp.
	KVMSEV    *bool `json:"kvmSev,omitempty"`
	KVMSEVES  *bool `json:"kvmSevEs,omitempty"`
	KVMSEVSNP *bool `json:"kvmSevSnp,omitempty"`
	// FirmwareVersion is the SEV-SNP API version from the boot log ("1.55");
	// when the kernel printed no SEV-SNP line (firmware too old for SNP) it
	// is the SEV API version of the same firmware.
	FirmwareVersion string `json:"firmwareVersion,omitempty"`
	FirmwareBuild   *int   `json:"firmwareBuild,omitempty"`
	// FirmwareTooOld is set when the kernel said SNP needs newer firmware.
	FirmwareTooOld bool `json:"firmwareTooOld,omitempty"`
	// FirmwareInitError is the PSP's failure to initialise SEV/SNP as the
	// boot log printed it ("SEV: INIT failed 0x13, rc -5").
	FirmwareInitError string `json:"firmwareInitError,omitempty"`
	// RMPReserved is from the boot log: true on "RMP table physical range",
	// false on "has not been reserved by BIOS", nil without a boot log.
	RMPReserved *bool  `json:"rmpReserved,omitempty"`
	SNPASIDs    *Range `json:"snpAsids,omitempty"`
	SEVASIDs    *Range `json:"sevAsids,omitempty"`
	SEVESASIDs  *Range `json:"sevEsAsids,omitempty"`
	// IOMMUSNP is from "AMD-Vi: IOMMU SNP support enabled".
	IOMMUSNP *bool `json:"iommuSnp,omitempty"`
	// TCB is what the SEV firmware says about its TCB (read only on a
	// live root, recorded into snapshots); nil and unknown with the reason
	// when it could not be read.
	TCB *SNPTCB `json:"tcb,omitempty"`
}

// SNPTCB is the TCB of the SEV firmware, from the SNP_PLATFORM_STATUS
// command on /dev/sev (what snphost show tcb prints). The TCB_VERSION
// values are 64-bit, "0x..."; their byte layout depends on the product
// line (Turin differs), so they are kept whole.
type SNPTCB struct {
	// Current is CURRENT_TCB: the TCB_VERSION of the firmware running now.
	Current string `json:"current"`
	// Reported is REPORTED_TCB: the TCB_VERSION guests' attestation
	// reports carry and their VCEK is derived from; the host may set it
	// below Current (SNP_SET_CONFIG) while it rolls out an update.
	Reported string `json:"reported"`
	// ChipID is the chip's unique ID (SEV_GET_ID2), hex; empty when it
	// could not be read.
	ChipID string `json:"chipId,omitempty"`
	// Source names the command and device it was read from.
	Source string `json:"source"`
	// Recorded is true when read from an offline root's recorded probe.
	Recorded bool `json:"recorded,omitempty"`
}

// TDX holds the Intel TDX host facts.
type TDX struct {
	KVMTDX *bool `json:"kvmTdx,omitempty"`
	// BIOSKeyIDs is the private KeyID range the BIOS reserved, nil when the
	// boot log does not say (TDX off in BIOS, or no boot log).
	BIOSKeyIDs *Range `json:"biosKeyIds,omitempty"`
	// ModuleInitialized is true on "module initialized", false on a
	// failure line.
	ModuleInitialized *bool  `json:"moduleInitialized,omitempty"`
	ModuleError       string `json:"moduleError,omitempty"` // e.g. "Hibernation support is enabled"
	// ModuleVersion is "1.5" (kernels that print major/minor) or
	// "1.5.06.00" (kernels that print the full version).
	ModuleVersion   string `json:"moduleVersion,omitempty"`
	ModuleBuildNum  *int   `json:"moduleBuildNum,omitempty"`
	ModuleBuildDate string `json:"moduleBuildDate,omitempty"` // as printed: "20240725" or "0134d817"
	// Sysfs holds sys/firmware/tdx/tdx_module/* on kernels that have it.
	Sysfs map[string]string `json:"sysfs,omitempty"`
}

// SGX holds the facts needed for TDX attestation quotes.
type SGX struct {
	Enclave   bool  `json:"enclave"`
	Provision bool  `json:"provision"`
	KVMSGX    *bool `json:"kvmSgx,omitempty"`
}

// Runtimes holds the container runtimes found.
type Runtimes struct {
	Containerd *ContainerRuntime `json:"containerd,omitempty"`
	CRIO       *ContainerRuntime `json:"crio,omitempty"`
}

// ContainerRuntime is containerd or CRI-O as found on the host.
type ContainerRuntime struct {
	// Binary is the absolute path of the runtime binary inside the root.
	Binary  string `json:"binary,omitempty"`
	Version string `json:"version,omitempty"`
	// Layout names the platform.Layouts entry whose paths were used: the
	// detected distribution's, or the plain one ("kubeadm" for containerd,
	// "openshift" for CRI-O) when the distribution uses the other runtime
	// or none was detected.
	Layout string `json:"layout,omitempty"`
	// ConfigPath is the config file the detected distribution uses,
	// relative to the root like every file path below.
	ConfigPath   string `json:"configPath,omitempty"`
	ConfigExists bool   `json:"configExists"`
	// ConfigVersion is containerd's top-level `version` (2, 3, 4); 0 for CRI-O.
	ConfigVersion int `json:"configVersion,omitempty"`
	// ConfigError says why the config did not parse, with line and column.
	ConfigError string `json:"configError,omitempty"`
	// Template is the distribution's config template (k3s, RKE2, microk8s)
	// when present.
	Template string `json:"template,omitempty"`
	// Imports are containerd's `imports` globs; for CRI-O the drop-in
	// directory.
	Imports      []string  `json:"imports,omitempty"`
	DropIns      []string  `json:"dropIns,omitempty"`
	Handlers     []Handler `json:"handlers,omitempty"`
	Snapshotters []string  `json:"snapshotters,omitempty"`
	Socket       string    `json:"socket,omitempty"`
	SocketExists bool      `json:"socketExists"`
	// DefaultHandler is containerd's default_runtime_name or CRI-O's
	// default_runtime, when the config sets it.
	DefaultHandler string `json:"defaultHandler,omitempty"`
	// DefaultSnapshotter is containerd's CRI snapshotter setting (empty:
	// containerd's built-in overlayfs); for CRI-O its storage_driver.
	DefaultSnapshotter string `json:"defaultSnapshotter,omitempty"`
	// DevmapperPool is the devmapper snapshotter's pool_name (the
	// device-mapper name of its thin pool) when the config sets one.
	DevmapperPool string `json:"devmapperPool,omitempty"`
	// IgnoredHandlers are handlers written under a CRI plugin key the
	// config version does not read (v2 keys in a version 3 config): the
	// runtime ignores them and pods fail with `no runtime for "<handler>"
	// is configured`. Each entry names file, handler and expected key.
	IgnoredHandlers []string `json:"ignoredHandlers,omitempty"`
	// CDIEnabled is containerd's CRI enable_cdi when the merged config sets
	// it; nil when no file does (containerd 1.7 then leaves CDI off, 2.x
	// turns it on). Always nil for CRI-O, whose CDI cannot be turned off.
	CDIEnabled *bool `json:"cdiEnabled,omitempty"`
}

// Handler is one runtime handler configured in a container runtime.
type Handler struct {
	Name        string `json:"name"`
	RuntimeType string `json:"runtimeType,omitempty"`
	RuntimePath string `json:"runtimePath,omitempty"`
	// RuntimeRoot is runtime_root (CRI-O's "/run/vc" for Kata).
	RuntimeRoot string `json:"runtimeRoot,omitempty"`
	// ConfigPath is options.ConfigPath (containerd) or runtime_config_path
	// (CRI-O): the Kata configuration file of the handler.
	ConfigPath                   string   `json:"configPath,omitempty"`
	Snapshotter                  string   `json:"snapshotter,omitempty"`
	PodAnnotations               []string `json:"podAnnotations,omitempty"`
	PrivilegedWithoutHostDevices bool     `json:"privilegedWithoutHostDevices,omitempty"`
	// Options are containerd's other handler options (BinaryName,
	// SystemdCgroup ...), formatted as text.
	Options map[string]string `json:"options,omitempty"`
	// Source is the file that defined it, or the last file that changed
	// it when imports or drop-ins override keys.
	Source string `json:"source,omitempty"`
	// Kata is what the handler's Kata configuration (ConfigPath with its
	// config.d drop-ins) boots; nil when the handler names no file.
	Kata *KataGuest `json:"kata,omitempty"`
}

// KataGuest is the guest a Kata configuration boots: the [hypervisor.*]
// section's kernel, image and initrd, after the drop-ins in config.d/
// beside the file (later files win, as Kata reads them).
type KataGuest struct {
	// Hypervisor is the section the values came from ("qemu").
	Hypervisor string `json:"hypervisor,omitempty"`
	Kernel     string `json:"kernel,omitempty"`
	Image      string `json:"image,omitempty"`
	Initrd     string `json:"initrd,omitempty"`
	// Error says why the configuration was not read (missing, syntax
	// with line and column).
	Error string `json:"error,omitempty"`
}

// Distribution is the Kubernetes distribution detected on the host.
type Distribution struct {
	// Name is kubeadm, k3s, rke2, k0s, microk8s, aks, openshift, or empty
	// when no distribution was recognised.
	Name     string   `json:"name,omitempty"`
	Evidence []string `json:"evidence,omitempty"`
	// PodResourcesSocket is the kubelet's pod-resources socket of the
	// distribution (its kubelet root + /pod-resources/kubelet.sock), which
	// Kata's cold plug of GPUs asks; PodResourcesPresent says whether it
	// exists. Both are set only when a distribution was recognised.
	PodResourcesSocket  string `json:"podResourcesSocket,omitempty"`
	PodResourcesPresent bool   `json:"podResourcesPresent,omitempty"`
}

// Binary is one hypervisor or helper found on the host.
type Binary struct {
	// Name is the logical component: qemu, cloud-hypervisor, firecracker,
	// virtiofsd, nydus-snapshotter, kata-shim, kata-runtime, containerd, crio.
	Name string `json:"name"`
	// Path is absolute inside the root, as argv[0] of the version command.
	Path    string `json:"path"`
	Version string `json:"version,omitempty"`
	// Vendor notes a distributor build recognised from the version string
	// (e.g. "Debian", "kata-static", "AMDESE snp").
	Vendor string `json:"vendor,omitempty"`
	// VersionFrom says where Version came from: "file" (the version line
	// compiled into the binary), "build info" (a Go binary's embedded
	// module version or -ldflags), "package <name>" (the Debian package
	// database, when the file is unchanged since the package installed
	// it) or "--version" (running the binary). The static sources are
	// tried first so that nothing from the host is executed.
	VersionFrom string `json:"versionFrom,omitempty"`
	Recorded    bool   `json:"recorded,omitempty"`
}

// QEMUProbe is what a QEMU started with no guest said over QMP.
type QEMUProbe struct {
	Binary  string `json:"binary"`
	Ran     bool   `json:"ran"`
	Version string `json:"version,omitempty"`
	Package string `json:"package,omitempty"`
	// KVMPresent and KVMEnabled are from query-kvm.
	KVMPresent bool `json:"kvmPresent"`
	KVMEnabled bool `json:"kvmEnabled"`
	// ConfidentialTypes are the confidential-guest object types compiled in
	// (sev-guest, sev-snp-guest, tdx-guest).
	ConfidentialTypes []string `json:"confidentialTypes,omitempty"`
	// SEVCapabilities is set when query-sev-capabilities answered.
	SEVCapabilities bool `json:"sevCapabilities,omitempty"`
	// SEVError is query-sev-capabilities' error reply ("SEV is not enabled
	// in KVM", "The command query-sev-capabilities has not been found").
	SEVError   string `json:"sevError,omitempty"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"durationMs,omitempty"`
	Recorded   bool   `json:"recorded,omitempty"`
}

// Storage describes block devices and the file systems that hold what
// sandboxes need on disk.
type Storage struct {
	BlockDevices []BlockDevice `json:"blockDevices,omitempty"`
	// Filesystems are the file systems under the directories guest
	// images and snapshots are written to (see Filesystem.Path), one
	// entry per directory whose nearest existing ancestor could be
	// measured.
	Filesystems []Filesystem `json:"filesystems,omitempty"`
}

// Filesystem is the file system holding one directory that sandboxes
// fill: the Kata and berth prefixes, containerd's and CRI-O's roots, the
// nydus snapshotter's root.
type Filesystem struct {
	// Path is the directory asked about, relative to the root
	// ("var/lib/containerd"); Measured is its nearest existing ancestor,
	// the directory actually measured (the same when Path exists).
	Path     string `json:"path"`
	Measured string `json:"measured"`
	// SizeBytes and FreeBytes are statfs' f_blocks and f_bavail (what an
	// unprivileged writer may still use) in bytes.
	SizeBytes uint64 `json:"sizeBytes"`
	FreeBytes uint64 `json:"freeBytes"`
	// Device is the block device (a sys/block name, partitions resolved
	// to their disk) holding the file system; empty for file systems
	// without one (tmpfs, overlay, NFS).
	Device string `json:"device,omitempty"`
	// Recorded is true when the values come from a snapshot's recorded
	// probe rather than from statfs now.
	Recorded bool `json:"recorded,omitempty"`
}

// BlockDevice is one entry of sys/block.
type BlockDevice struct {
	Name       string `json:"name"`
	Rotational bool   `json:"rotational"`
	// Transport is nvme, virtio, scsi, sata, usb, iscsi, nbd, rbd, xen,
	// loop, dm, md, zram, or other.
	Transport string `json:"transport"`
	// Remote is true for network-attached storage (iSCSI, NBD, RBD, NVMe
	// over fabrics) and for dm/md devices built on one.
	Remote    bool   `json:"remote"`
	SizeBytes uint64 `json:"sizeBytes,omitempty"`
	// DMName is a device-mapper device's name (sys/block/dm-N/dm/name):
	// what containerd's devmapper pool_name refers to.
	DMName string `json:"dmName,omitempty"`
	// Slaves are the block devices a dm or md device is built on.
	Slaves []string `json:"slaves,omitempty"`
}

// Network describes what VM networking needs.
type Network struct {
	// SRIOVNICs are network interfaces that can create virtual functions.
	SRIOVNICs []SRIOVNIC `json:"sriovNics,omitempty"`
	// Reachability is the outcome of the opt-in live reachability probes
	// (berth check --network).
	Reachability Reachability `json:"reachability"`
}

// SRIOVNIC is one SR-IOV capable NIC.
type SRIOVNIC struct {
	Interface string `json:"interface"`
	TotalVFs  int    `json:"totalVfs"`
	NumVFs    int    `json:"numVfs"`
	// Address is the physical function's PCI address and Driver its
	// driver (ice, mlx5_core, i40e ...).
	Address string `json:"address,omitempty"`
	Driver  string `json:"driver,omitempty"`
	// VFs are the enabled virtual functions (the virtfn<N> links).
	VFs []SRIOVVF `json:"vfs,omitempty"`
}

// SRIOVVF is one virtual function of a NIC.
type SRIOVVF struct {
	Address string `json:"address"`
	// Driver is the VF's driver: the PF's VF driver (iavf, mlx5_core)
	// for a host network device, vfio-pci for passthrough to a VM, empty
	// when none is bound.
	Driver     string `json:"driver,omitempty"`
	IOMMUGroup *int   `json:"iommuGroup,omitempty"`
}

// Reachability records the live network probes. They run only when asked
// for (berth check --network) and only on a live root: otherwise Checked
// is false and NotChecked says why, and the checks reading it are
// skipped rather than unknown, so that a host is not "ready with
// warnings" merely because nobody asked.
type Reachability struct {
	Checked    bool   `json:"checked"`
	NotChecked string `json:"notChecked,omitempty"`
	// TimeoutMS is the per-target timeout used.
	TimeoutMS int64      `json:"timeoutMs,omitempty"`
	Targets   []Endpoint `json:"targets,omitempty"`
}

// Endpoint is one probed service.
type Endpoint struct {
	// Role is "registry" or "attestation".
	Role string `json:"role"`
	URL  string `json:"url"`
	// Reachable is true when the service answered over HTTP(S) (any
	// status: an OCI registry answers /v2/ with 401 to anonymous clients).
	Reachable  bool `json:"reachable"`
	HTTPStatus int  `json:"httpStatus,omitempty"`
	// Failure classifies an unreachable target: timeout, refused, dns,
	// tls or error; Error is the error text.
	Failure string `json:"failure,omitempty"`
	Error   string `json:"error,omitempty"`
	// CertUntrusted is set when the TLS handshake completed but the
	// certificate did not verify against this host's trust store (a
	// KBS often has its own CA, which the guest, not the host, trusts).
	CertUntrusted bool `json:"certUntrusted,omitempty"`
}

// Plugins holds what host plug-ins contributed.
type Plugins struct {
	// Features are key=value facts from /etc/berth/features.d and from the
	// "facts" of executable checks in /etc/berth/checks.d (which win).
	Features map[string]string `json:"features,omitempty"`
	// FeatureSources names where each feature came from, by key: the
	// feature file ("etc/berth/features.d/10-site") or the executable check
	// ("etc/berth/checks.d/attest") that set it last.
	FeatureSources map[string]string `json:"featureSources,omitempty"`
	// Notes are plug-ins ignored on purpose (an expired feature file), for
	// the record; they are not failures.
	Notes []PluginError `json:"notes,omitempty"`
	// Errors describes feature files or executable checks that could not
	// be used, one per plug-in.
	Errors []PluginError `json:"errors,omitempty"`
	// Findings are what executable checks returned, as raw JSON findings
	// validated by the plugin package.
	Findings []PluginFinding `json:"findings,omitempty"`
}

// PluginError is a plug-in that could not be used.
type PluginError struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

// PluginFinding is one finding reported by an executable check.
type PluginFinding struct {
	Plugin  string `json:"plugin"`
	ID      string `json:"id"`
	Status  string `json:"status"`
	Title   string `json:"title,omitempty"`
	Message string `json:"message,omitempty"`
	Remedy  string `json:"remedy,omitempty"`
}
