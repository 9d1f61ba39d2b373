package platform

// The tables below are the one place where a dimension's properties live:
// Kata's names for it, its binaries, firmware, configuration table, pod
// overhead, Node Feature Discovery labels. Code elsewhere asks a Platform
// (or a dimension value) instead of switching on the dimension itself, so
// that adding a hypervisor or a TEE is a row here and a rule in rules.go.
//
// Sources: Kata Containers 4.1.0's configuration templates
// (src/runtime/config, src/runtime-rs/config) and kata-deploy's Helm chart
// (values.yaml `shims`, templates/runtimeclasses.yaml,
// templates/node-feature-rules.yaml); tests compare these rows with those
// files in ../shared/upstream.

// hypervisorRow is everything berth knows about one hypervisor.
type hypervisorRow struct {
	h     Hypervisor
	name  string
	short string // Kata's abbreviation, the first part of the shim name
	// aliases are further accepted spellings (lowercase). Rows hold arrays,
	// not slices, so that looking a row up allocates nothing: build, the
	// hot path of All and of suggestions, asks for them.
	aliases [3]string
	desc    string
	display string
	// runtimes are the Kata runtimes kata-deploy ships a shim of this
	// hypervisor for; the first is the default.
	runtimes [2]KataRuntime
	// rsSuffix: the Rust runtime's shim name ends in -runtime-rs (all but
	// dragonball, which exists only in runtime-rs and has no suffix).
	rsSuffix bool
	// section is the [hypervisor.<section>] table of Kata's configuration.
	section string
	// binary is the hypervisor's executable under <prefix>/bin; "" when
	// none runs on the node (dragonball is linked into the runtime-rs
	// shim; remote starts its VM in a cloud).
	binary string
	// sharedFS is Kata's shared_fs when the platform does not pull images
	// in the guest: how the container rootfs reaches the guest.
	sharedFS string
	// local is false for remote: no VM runs on the node, so KVM and the
	// node's CPU features do not matter.
	local bool
}

// hypervisorTable returns the rows in constant order. The table is data,
// never changed: a package-level array, so that the lookups every check
// evaluation makes copy one row, not build the table.
func hypervisorTable() []hypervisorRow { return hypervisorRows[:] }

var hypervisorRows = [...]hypervisorRow{
	{h: QEMU, name: "qemu", short: "qemu", display: "QEMU",
		desc:     "QEMU (the only one with TEE and GPU support on bare metal)",
		runtimes: [2]KataRuntime{GoRuntime, RustRuntime}, rsSuffix: true,
		section: "qemu", binary: "qemu-system-x86_64", sharedFS: "virtio-fs", local: true},
	{h: CloudHypervisor, name: "cloud-hypervisor", short: "clh", display: "Cloud Hypervisor",
		aliases:  [3]string{"cloudhypervisor", "cloud_hypervisor", "ch"},
		desc:     "Cloud Hypervisor (virtio-fs, small footprint; on AKS the MSHV build, clh-azure)",
		runtimes: [2]KataRuntime{GoRuntime, RustRuntime}, rsSuffix: true,
		section: "clh", binary: "cloud-hypervisor", sharedFS: "virtio-fs", local: true},
	{h: Firecracker, name: "firecracker", short: "fc", display: "Firecracker",
		desc: "Firecracker (no shared filesystem: block-device rootfs only)",
		// runtime-rs has a configuration-rs-fc template, but kata-deploy
		// ships no fc-runtime-rs shim.
		runtimes: [2]KataRuntime{GoRuntime},
		section:  "firecracker", binary: "firecracker", sharedFS: "none", local: true},
	{h: Dragonball, name: "dragonball", short: "dragonball", display: "Dragonball",
		aliases:  [3]string{"db"},
		desc:     "Dragonball (built into the Rust runtime's shim; inline virtio-fs)",
		runtimes: [2]KataRuntime{RustRuntime},
		section:  "dragonball", sharedFS: "inline-virtio-fs", local: true},
	{h: StratoVirt, name: "stratovirt", short: "stratovirt", display: "StratoVirt",
		desc:     "StratoVirt (openEuler's lightweight VMM, Go runtime only)",
		runtimes: [2]KataRuntime{GoRuntime},
		section:  "stratovirt", binary: "stratovirt", sharedFS: "virtio-fs", local: true},
	{h: OpenVMM, name: "openvmm", short: "openvmm", display: "OpenVMM",
		desc:     "OpenVMM on Hyper-V (AKS only, Rust runtime: openvmm-azure-runtime-rs)",
		runtimes: [2]KataRuntime{RustRuntime}, rsSuffix: true,
		section: "openvmm", binary: "openvmm", sharedFS: "virtio-fs", local: true},
	{h: Remote, name: "remote", short: "remote", display: "peer pods (remote)",
		aliases:  [3]string{"peer-pods", "peerpods", "peer-pod"},
		desc:     "peer pods: each sandbox is a cloud VM started by the cloud-api-adaptor, not a VM on the node",
		runtimes: [2]KataRuntime{GoRuntime},
		section:  "remote", sharedFS: "none", local: false},
}

// hypervisorRowOf returns h's row; the table is in constant order, so the
// row of h is at h-1 (TestTables checks it).
func hypervisorRowOf(h Hypervisor) (hypervisorRow, bool) {
	if h == 0 || int(h) > len(hypervisorRows) {
		return hypervisorRow{}, false
	}
	return hypervisorRows[h-1], true
}

// shipped returns the runtimes of a row without the empty slots.
func (r hypervisorRow) shipped() []KataRuntime {
	var out []KataRuntime
	for _, rt := range r.runtimes {
		if rt != 0 {
			out = append(out, rt)
		}
	}
	return out
}

// teeRow is everything berth knows about one TEE.
type teeRow struct {
	t TEE
	// display is the vendor's name.
	display string
	// firmware is the guest firmware QEMU boots a guest of this TEE with,
	// under <prefix>/share/ovmf (Kata's FIRMWAREPATH for the shim).
	firmware string
	// nfdLabel is the label kata-deploy's NodeFeatureRule publishes on
	// nodes with this TEE enabled, and its RuntimeClasses select on.
	nfdLabel string
	// nfdBuiltinLabel is Node Feature Discovery's own cpu-security label.
	nfdBuiltinLabel string
	// keyResource is the extended resource kata-deploy's NodeFeatureRule
	// publishes (the node's SEV-SNP encryption IDs or TDX key IDs), which
	// each confidential sandbox consumes through its RuntimeClass's
	// overhead.
	keyResource string
	// minQEMU is the upstream QEMU release that launches guests of this
	// TEE.
	minQEMU []int
}

// teeRows are the TEE table, data never changed (see hypervisorRows).
var teeRows = [...]teeRow{
	{t: NoTEE, display: "none"},
	{t: SNP, display: "AMD SEV-SNP", firmware: "AMDSEV.fd",
		nfdLabel:        "amd.feature.node.kubernetes.io/snp",
		nfdBuiltinLabel: "feature.node.kubernetes.io/cpu-security.sev.snp.enabled",
		keyResource:     "sev-snp.amd.com/esids", minQEMU: []int{9, 1}},
	{t: TDX, display: "Intel TDX", firmware: "OVMF.inteltdx.fd",
		nfdLabel:        "intel.feature.node.kubernetes.io/tdx",
		nfdBuiltinLabel: "feature.node.kubernetes.io/cpu-security.tdx.enabled",
		keyResource:     "tdx.intel.com/keys", minQEMU: []int{10, 1}},
}

func teeRowOf(t TEE) teeRow {
	for _, r := range teeRows {
		if r.t == t {
			return r
		}
	}
	return teeRow{}
}

// shimOverheads are kata-deploy's RuntimeClass pod overheads per shim
// (templates/runtimeclasses.yaml, kata-deploy.runtimeClassConfigs).
var (
	smallOverhead = Overhead{MemoryMiB: 130, MilliCPU: 250}
	qemuOverhead  = Overhead{MemoryMiB: 320, MilliCPU: 250}
	teeOverhead   = Overhead{MemoryMiB: 2048, MilliCPU: 1000}
	gpuOverhead   = Overhead{MemoryMiB: 10240, MilliCPU: 1000}
)

// shimOverheads is data never changed (see hypervisorRows).
var shimOverheads = map[string]Overhead{
	"clh": smallOverhead, "clh-azure": smallOverhead, "clh-runtime-rs": smallOverhead, "clh-azure-runtime-rs": smallOverhead,
	"openvmm-azure-runtime-rs": smallOverhead, "dragonball": smallOverhead, "fc": smallOverhead, "stratovirt": smallOverhead,
	"qemu": qemuOverhead, "qemu-runtime-rs": qemuOverhead,
	"qemu-coco-dev":            {MemoryMiB: 160, MilliCPU: 250},
	"qemu-coco-dev-runtime-rs": qemuOverhead,
	"qemu-se":                  {MemoryMiB: 1024, MilliCPU: 1000}, "qemu-se-runtime-rs": {MemoryMiB: 1024, MilliCPU: 1000},
	"qemu-snp": teeOverhead, "qemu-snp-runtime-rs": teeOverhead, "qemu-tdx": teeOverhead, "qemu-tdx-runtime-rs": teeOverhead,
	"qemu-nvidia-cpu": qemuOverhead, "qemu-nvidia-cpu-runtime-rs": qemuOverhead,
	"qemu-nvidia-gpu": gpuOverhead, "qemu-nvidia-gpu-runtime-rs": gpuOverhead,
	"qemu-nvidia-gpu-snp": gpuOverhead, "qemu-nvidia-gpu-snp-runtime-rs": gpuOverhead,
	"qemu-nvidia-gpu-tdx": gpuOverhead, "qemu-nvidia-gpu-tdx-runtime-rs": gpuOverhead,
	"remote": {MemoryMiB: 120, MilliCPU: 250},
}

// shimNodeSelectors are the node selectors kata-deploy's values.yaml gives
// a shim's RuntimeClass (shims.<name>.runtimeClass.nodeSelector): the GPU
// operator's confidential-computing state label.
func shimNodeSelectors(gpu bool, tee TEE) map[string]string {
	if !gpu {
		return nil
	}
	if tee == NoTEE {
		return map[string]string{"nvidia.com/cc.ready.state": "false"}
	}
	return map[string]string{"nvidia.com/cc.ready.state": "true", teeRowOf(tee).nfdLabel: "true"}
}

// foreignShims are kata-deploy shims for other architectures, with the
// reason berth refuses them (rule non-x86-shim).
func foreignShims() map[string]string {
	return map[string]string{
		"qemu-se":             "IBM Secure Execution runs on s390x",
		"qemu-se-runtime-rs":  "IBM Secure Execution runs on s390x",
		"qemu-cca":            "Arm CCA runs on arm64",
		"qemu-cca-runtime-rs": "Arm CCA runs on arm64",
	}
}
