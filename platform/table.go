package platform

import (
	"slices"
	"strings"
)

// The tables below are the one place where a dimension's properties live:
// Kata's names for it, its binaries, firmware, configuration table, pod
// overhead, Node Feature Discovery labels. Code elsewhere asks a Platform
// (or a dimension value) instead of switching on the dimension itself, so
// that adding a hypervisor or a TEE is a row here and a rule in rules.go.
//
// Sources: Kata Containers 4.1.0's configuration templates
// (src/runtime/config, src/runtime-rs/config) and kata-deploy's Helm chart
// (values.yaml `shims`, templates/runtimeclasses.yaml,
// templates/node-feature-rules.yaml); tests compare these rows with the
// templates, values.yaml and runtimeclasses.yaml, copied into the
// repository root's testdata/upstream.

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
	// vhost: the agent's vsock and virtio-net go through the host's
	// vhost_vsock and vhost_net (QEMU); the others use a hybrid vsock.
	vhost bool
	// probe: berth can start the hypervisor once without a guest to see
	// that it works (QEMU).
	probe bool
	// vfio: the hypervisor passes PCI devices through (all but
	// Firecracker).
	vfio bool
}

// hypervisorTable returns the rows in constant order. The table is data,
// never changed: a package-level array, so that the lookups every check
// evaluation makes copy one row, not build the table.
func hypervisorTable() []hypervisorRow { return hypervisorRows[:] }

var hypervisorRows = [...]hypervisorRow{
	{h: QEMU, name: "qemu", short: "qemu", display: "QEMU",
		desc:     "QEMU (the only one with TEE and GPU support on bare metal)",
		runtimes: [2]KataRuntime{GoRuntime, RustRuntime}, rsSuffix: true,
		section: "qemu", binary: "qemu-system-x86_64", sharedFS: "virtio-fs", local: true,
		vhost: true, probe: true, vfio: true},
	{h: CloudHypervisor, name: "cloud-hypervisor", short: "clh", display: "Cloud Hypervisor",
		aliases:  [3]string{"cloudhypervisor", "cloud_hypervisor", "ch"},
		desc:     "Cloud Hypervisor (virtio-fs, small footprint; on AKS the MSHV build, clh-azure)",
		runtimes: [2]KataRuntime{GoRuntime, RustRuntime}, rsSuffix: true,
		section: "clh", binary: "cloud-hypervisor", sharedFS: "virtio-fs", local: true, vfio: true},
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
		section:  "dragonball", sharedFS: "inline-virtio-fs", local: true, vfio: true},
	{h: StratoVirt, name: "stratovirt", short: "stratovirt", display: "StratoVirt",
		desc:     "StratoVirt (openEuler's lightweight VMM, Go runtime only)",
		runtimes: [2]KataRuntime{GoRuntime},
		section:  "stratovirt", binary: "stratovirt", sharedFS: "virtio-fs", local: true, vfio: true},
	{h: OpenVMM, name: "openvmm", short: "openvmm", display: "OpenVMM",
		desc:     "OpenVMM on Hyper-V (AKS only, Rust runtime: openvmm-azure-runtime-rs)",
		runtimes: [2]KataRuntime{RustRuntime}, rsSuffix: true,
		section: "openvmm", binary: "openvmm", sharedFS: "virtio-fs", local: true, vfio: true},
	{h: Remote, name: "remote", short: "remote", display: "peer pods (remote)",
		aliases:  [3]string{"peer-pods", "peerpods", "peer-pod"},
		desc:     "peer pods: each sandbox is a cloud VM started by the cloud-api-adaptor, not a VM on the node",
		runtimes: [2]KataRuntime{GoRuntime},
		section:  "remote", sharedFS: "none", local: false, vfio: true},
}

// hypervisorRowOf returns h's row; the table is in constant order, so the
// row of h is at h-1 (TestTables checks it). The row is returned by
// reference, read-only: a copy is some 250 bytes, and Local, asked for
// every check on every platform, paid that copy for one bool. An unknown
// h gets a fresh empty row.
func hypervisorRowOf(h Hypervisor) (*hypervisorRow, bool) {
	if h == 0 || int(h) > len(hypervisorRows) {
		return &hypervisorRow{}, false
	}
	return &hypervisorRows[h-1], true
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

// teeRowOf returns t's row by reference, read-only (see hypervisorRowOf).
func teeRowOf(t TEE) *teeRow {
	for i := range teeRows {
		if teeRows[i].t == t {
			return &teeRows[i]
		}
	}
	return &teeRow{}
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
		return map[string]string{NVIDIACCReadyLabel: "false"}
	}
	return map[string]string{NVIDIACCReadyLabel: "true", teeRowOf(tee).nfdLabel: "true"}
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

// teeHostRow is what the host side of a TEE looks like to berth's checks:
// the QEMU object that launches its guests, the vendor builds that carry
// its patches, and what its launch measurement covers.
type teeHostRow struct {
	// qemuObject is the QEMU object type of the confidential guest
	// (`-object sev-snp-guest`, `-object tdx-guest`).
	qemuObject string
	// vendorMarks are substrings of a QEMU build's vendor string that name
	// a build carrying the TEE's patches ahead of upstream (AMD's SNP
	// branch, Canonical's or Intel's TDX QEMU).
	vendorMarks [3]string
	// sev: the TEE is AMD's SEV family, whose QEMU reports SEV launch
	// errors (QEMUProbe.SEVError) of its own.
	sev bool
	// productLines: AMD pins attestation (VCEKs, firmware) per EPYC
	// product line; Intel's PCS has no such split.
	productLines bool
	// measuresDirectBoot: the launch measurement covers a directly booted
	// kernel, initrd and command line (SNP's launch digest with measured
	// direct boot); TDX puts them in RTMRs, which berth does not compute.
	measuresDirectBoot bool
	// initData is the launch field Kata binds a CoCo init-data document's
	// digest to, and its size in bytes: SNP's HOST_DATA (32), TDX's
	// MRCONFIGID (48) (kata-containers src/runtime/pkg/oci/utils.go,
	// addHypervisorInitdataOverrides; govmm qemu.go adjustProperLength).
	initData     string
	initDataSize int
}

// teeHostRows are indexed like teeRows (data never changed): an array,
// static data, where a map is built at initialisation.
var teeHostRows = [...]teeHostRow{
	SNP: {qemuObject: "sev-snp-guest", vendorMarks: [3]string{"snp", "amdese", "sev"}, sev: true,
		productLines: true, measuresDirectBoot: true, initData: "HOST_DATA", initDataSize: 32},
	TDX: {qemuObject: "tdx-guest", vendorMarks: [3]string{"tdx"}, initData: "MRCONFIGID", initDataSize: 48},
}

// hostRowOf returns t's row; the zero row for NoTEE and unknown values.
func hostRowOf(t TEE) teeHostRow {
	if int(t) < len(teeHostRows) {
		return teeHostRows[t]
	}
	return teeHostRow{}
}

// QEMUGuestObject returns the QEMU object type that launches guests of the
// TEE ("sev-snp-guest", "tdx-guest"), or "" without a TEE.
func (t TEE) QEMUGuestObject() string { return hostRowOf(t).qemuObject }

// VendorBuild reports whether a QEMU build's vendor string names a build
// that carries the TEE's patches ahead of upstream: Kata's static build,
// AMD's SNP branch, Canonical's or Intel's TDX QEMU. Plain distribution
// packages do not count.
func (t TEE) VendorBuild(vendor string) bool {
	v := strings.ToLower(vendor)
	if t == NoTEE || v == "" {
		return false
	}
	if strings.Contains(v, "kata") {
		return true
	}
	for _, m := range hostRowOf(t).vendorMarks {
		if m != "" && strings.Contains(v, m) {
			return true
		}
	}
	return false
}

// SEV reports whether the TEE is AMD's SEV family, whose QEMU reports
// launch errors of its own (QEMUProbe.SEVError).
func (t TEE) SEV() bool { return hostRowOf(t).sev }

// HasProductLines reports whether a platform of this TEE can be pinned to a
// CPU product line (SNP: AMD publishes VCEKs and firmware per EPYC
// generation).
func (t TEE) HasProductLines() bool { return hostRowOf(t).productLines }

// InitDataField returns the launch field the TEE binds an init-data
// digest to ("HOST_DATA" for SNP, "MRCONFIGID" for TDX) and its size in
// bytes; "" and 0 for a TEE that binds none.
func (t TEE) InitDataField() (name string, size int) {
	r := hostRowOf(t)
	return r.initData, r.initDataSize
}

// MeasuresDirectBoot reports whether the launch measurement berth computes
// for the TEE covers a directly booted kernel, initrd and command line
// (SNP); for TDX they go into RTMRs, which berth does not compute.
func (t TEE) MeasuresDirectBoot() bool { return hostRowOf(t).measuresDirectBoot }

// productLineRow is everything berth knows about one SNP product line.
type productLineRow struct {
	pl   ProductLine
	name string
	desc string
	// display is AMD's spelling, as in the KDS URL path /vcek/v1/{Milan,...}
	// and in reference-value documents.
	display string
	// cpus are the CPU generations (facts.CPU.ProductLine, discovery's
	// names) that certify as this product line: Bergamo and Siena are
	// Zen 4 parts sharing Genoa's SNP firmware and VCEKs.
	cpus [3]string
	// tcbFMC: the TCB_VERSION has the FMC component (Turin, family 1Ah,
	// moved the other fields; SEV-SNP firmware ABI, TCB_VERSION).
	tcbFMC bool
}

// productLineRows are the product-line table in constant order (data never
// changed); AnyProductLine has no row.
var productLineRows = [...]productLineRow{
	{pl: Milan, name: "milan", display: "Milan", desc: "AMD EPYC 7003 (Zen 3)", cpus: [3]string{"milan"}},
	{pl: Genoa, name: "genoa", display: "Genoa", desc: "AMD EPYC 9004/8004 (Zen 4, includes Bergamo and Siena)",
		cpus: [3]string{"genoa", "bergamo", "siena"}},
	{pl: Turin, name: "turin", display: "Turin", desc: "AMD EPYC 9005 (Zen 5)", cpus: [3]string{"turin"}, tcbFMC: true},
}

// productLineRowOf returns p's row by reference, read-only (see
// hypervisorRowOf).
func productLineRowOf(p ProductLine) (*productLineRow, bool) {
	if p == AnyProductLine || int(p) > len(productLineRows) {
		return &productLineRow{}, false
	}
	return &productLineRows[p-1], true
}

// ProductLineOfCPU returns the product line a CPU generation (as discovery
// names it: "milan", "genoa", "bergamo", "siena", "turin", ...) certifies
// as, and false for a CPU without SEV-SNP or an unknown one.
func ProductLineOfCPU(generation string) (ProductLine, bool) {
	g := norm(generation)
	if g == "" {
		return AnyProductLine, false
	}
	for _, r := range productLineRows {
		if slices.Contains(r.cpus[:], g) {
			return r.pl, true
		}
	}
	return AnyProductLine, false
}

// Pinned reports whether p names a product line (not AnyProductLine).
func (p ProductLine) Pinned() bool { _, ok := productLineRowOf(p); return ok }

// Display returns AMD's spelling of the product line ("Milan"), "" for
// AnyProductLine.
func (p ProductLine) Display() string { r, _ := productLineRowOf(p); return r.display }

// TCBHasFMC reports whether the product line's TCB_VERSION carries the FMC
// component (Turin), which moves the other components.
func (p ProductLine) TCBHasFMC() bool { r, _ := productLineRowOf(p); return r.tcbFMC }

// SnapshotterSetup is how a snapshotter gets onto a node, for the check
// that finds it missing: who installs it, what it needs, what to do.
type SnapshotterSetup struct {
	// Binary is the daemon berth looks for when the containerd config
	// does not list the snapshotter yet ("" for built-in ones).
	Binary string
	// MinContainerd is the oldest containerd that has it built in, or nil.
	MinContainerd []int
	// KernelConfig is the CONFIG_ option (without the prefix) it needs, or "".
	KernelConfig string
	// ByBerth: berth install deploys or enables it, so its absence is a
	// warning; otherwise the operator (or the platform's provider) must
	// set it up and its absence blocks.
	ByBerth bool
	// Missing is the message when it is not configured; "{hypervisor}"
	// stands for the platform's hypervisor.
	Missing string
	// Remedy says how to get it.
	Remedy string
	// Proxy is the containerd proxy plugin name berth's own configuration
	// gives it ("" when berth writes none): a config listing it has the
	// snapshotter as much as one listing the plain name.
	Proxy string
}

// snapshotterRow is everything berth knows about one snapshotter.
type snapshotterRow struct {
	s       Snapshotter
	name    string
	desc    string
	aliases [2]string
	// block: the snapshotter hands the guest block devices.
	block bool
	// dedicated: a runtime handler names it for itself, so containerd
	// must have it configured (overlayfs is containerd's default).
	dedicated bool
	// guestPull: the guest pulls and verifies the image itself.
	guestPull bool
	// noSharedFS: nothing of the image is shared over virtio-fs.
	noSharedFS bool
	// thinPool: sandbox disks are carved from an LVM thin pool.
	thinPool bool
	// layerFiles: each writable layer is a file of default_size under the
	// runtime root.
	layerFiles bool
	// pooled: the sandboxes' disks come from one pool of storage (a thin
	// pool or the scratch files' root) whose locality matters.
	pooled bool
	setup  SnapshotterSetup
}

// snapshotterRows are the snapshotter table in constant order (data never
// changed).
var snapshotterRows = [...]snapshotterRow{
	{s: Overlayfs, name: "overlayfs", aliases: [2]string{"overlay", "overlay2"},
		desc: "host-side overlay; shared into the guest with virtio-fs (or guest pull when forced)"},
	{s: Nydus, name: "nydus", aliases: [2]string{"nydus-snapshotter", "guest-pull"},
		desc:      "nydus-snapshotter in guest-pull mode: the guest pulls and verifies images",
		dedicated: true, guestPull: true,
		setup: SnapshotterSetup{Binary: "nydus-snapshotter", ByBerth: true, Proxy: "berth-nydus",
			Missing: "nydus snapshotter not installed yet",
			Remedy:  "berth install (or the node-installer) installs containerd-nydus-grpc, writes the proxy plugin berth-nydus and enables and starts berth-nydus-snapshotter.service before restarting containerd (berth config apply --restart starts it; without --restart: systemctl enable --now berth-nydus-snapshotter)"}},
	{s: Devmapper, name: "devmapper", desc: "device-mapper thin pool: each rootfs is a block device",
		block: true, dedicated: true, thinPool: true, pooled: true,
		setup: SnapshotterSetup{Missing: "devmapper snapshotter not configured: {hypervisor} needs block-device rootfs",
			Remedy: "create an LVM or loop thin pool and configure the devmapper snapshotter (pool_name, root_path, base_image_size) in containerd"}},
	{s: Blockfile, name: "blockfile", desc: "block files on the host filesystem: each rootfs is a block device",
		block: true, dedicated: true, layerFiles: true, pooled: true,
		setup: SnapshotterSetup{Missing: "blockfile snapshotter not configured",
			Remedy: "configure the blockfile snapshotter (scratch_file, root_path) in containerd"}},
	{s: Erofs, name: "erofs", desc: "EROFS layer images attached as block devices (containerd >= 2.1)",
		block: true, dedicated: true, layerFiles: true,
		setup: SnapshotterSetup{MinContainerd: []int{2, 1}, KernelConfig: "EROFS_FS", ByBerth: true,
			Missing: "erofs snapshotter not configured yet", Remedy: "berth install enables the erofs snapshotter"}},
	// Confidential Containers on AKS (Microsoft's kata-cc handler, which
	// Contrast calls AKS-CLH-SNP) pulls images on the host with the tardev
	// snapshotter: each layer is a tar file handed to the guest as a block
	// device with a dm-verity tree, whose roots the pod's policy pins, and
	// nothing is shared over virtio-fs. AKS installs it on KataCcIsolation
	// node pools (tardev-snapshotter.service, containerd proxy plugin
	// `tardev`, socket /run/containerd/tardev-snapshotter.sock). Sources:
	// edgelesssys/contrast node-installer/testdata/expected-aks-clh-snp.toml
	// (kata-cc snapshotter = 'tardev'; proxy_plugins.tardev type
	// 'snapshot'), its configuration-clh-snp.toml (shared_fs = "none"),
	// microsoft/kata-containers src/tardev-snapshotter.
	{s: Tardev, name: "tardev", aliases: [2]string{"tardev-snapshotter"},
		desc:      "tardev-snapshotter (AKS confidential containers): tar layers as dm-verity block devices, pinned by the pod policy",
		dedicated: true, noSharedFS: true,
		setup: SnapshotterSetup{Missing: "tardev snapshotter not configured (no containerd proxy plugin tardev)",
			Remedy: "create the node pool with --workload-runtime KataCcIsolation: AKS installs tardev-snapshotter and its containerd proxy plugin"}},
}

// snapshotterRowOf returns s's row by reference, read-only (see
// hypervisorRowOf).
func snapshotterRowOf(s Snapshotter) (*snapshotterRow, bool) {
	if s == 0 || int(s) > len(snapshotterRows) {
		return &snapshotterRow{}, false
	}
	return &snapshotterRows[s-1], true
}

// Dedicated reports whether a runtime handler names this snapshotter for
// itself, so that containerd must have it configured; false for
// overlayfs, containerd's default.
func (s Snapshotter) Dedicated() bool { r, _ := snapshotterRowOf(s); return r.dedicated }

// PullsInGuest reports whether the snapshotter has the guest pull and
// verify images itself (nydus in guest-pull mode).
func (s Snapshotter) PullsInGuest() bool { r, _ := snapshotterRowOf(s); return r.guestPull }

// ThinPool reports whether sandbox disks come from an LVM thin pool
// (devmapper's pool_name).
func (s Snapshotter) ThinPool() bool { r, _ := snapshotterRowOf(s); return r.thinPool }

// LayerFiles reports whether each writable layer is a file of the
// snapshotter's default_size under the runtime root (blockfile, erofs).
func (s Snapshotter) LayerFiles() bool { r, _ := snapshotterRowOf(s); return r.layerFiles }

// Pooled reports whether the sandboxes' disks come from one pool of
// storage (devmapper's thin pool, blockfile's root) whose locality
// matters.
func (s Snapshotter) Pooled() bool { r, _ := snapshotterRowOf(s); return r.pooled }

// Setup returns how the snapshotter gets onto a node.
func (s Snapshotter) Setup() SnapshotterSetup {
	r, _ := snapshotterRowOf(s)
	st := r.setup
	st.MinContainerd = slices.Clone(st.MinContainerd)
	return st
}

// kataRuntimeRow is everything berth knows about one Kata runtime.
type kataRuntimeRow struct {
	name, desc string
	// shim is the containerd shim v2 binary under the prefix: the Go
	// runtime's in bin/, the Rust runtime's in runtime-rs/bin/ (runtime-rs's
	// Makefile BINDIR, as in the kata-static release).
	shim string
}

var kataRuntimeRows = [...]kataRuntimeRow{
	{name: "go", desc: "Kata's Go runtime (src/runtime, containerd-shim-kata-v2)", shim: "bin/containerd-shim-kata-v2"},
	{name: "rust", desc: "Kata's Rust runtime (runtime-rs, the kata-deploy default since 4.0)", shim: "runtime-rs/bin/containerd-shim-kata-v2"},
}

// kataRuntimeRowOf returns r's row by reference, read-only (see
// hypervisorRowOf).
func kataRuntimeRowOf(r KataRuntime) (*kataRuntimeRow, bool) {
	if r == 0 || int(r) > len(kataRuntimeRows) {
		return &kataRuntimeRow{}, false
	}
	return &kataRuntimeRows[r-1], true
}

// ShimPath returns the runtime's containerd shim v2 binary relative to the
// install prefix.
func (r KataRuntime) ShimPath() string { row, _ := kataRuntimeRowOf(r); return row.shim }

// runtimeRoots are the container runtime's root per distribution: where
// images, snapshots and block-snapshotter layer files are written. The
// others use containerd's default, var/lib/containerd. An array indexed
// by Distribution: static data, where a map is built at initialisation.
var runtimeRoots = [...]string{
	K3s:       "var/lib/rancher/k3s/agent/containerd",
	RKE2:      "var/lib/rancher/rke2/agent/containerd",
	K0s:       "var/lib/k0s/containerd",
	MicroK8s:  "var/snap/microk8s/common/var/lib/containerd",
	OpenShift: "var/lib/containers/storage",
}

// RuntimeRoot returns the container runtime's root on the distribution,
// relative to the host root: where images, snapshots and
// block-snapshotter layer files are written.
func (d Distribution) RuntimeRoot() string {
	if int(d) < len(runtimeRoots) && runtimeRoots[d] != "" {
		return runtimeRoots[d]
	}
	return "var/lib/containerd"
}

// kubeletRoots are the kubelet's root directories (its --root-dir) where a
// distribution moves it; the others use the kubelet's default,
// var/lib/kubelet. Kata's runtime takes paths under it (kubelet_root_dir
// for ConfigMap/Secret propagation, pod_resource_api_sock for GPU
// cold-plug). Sources: kata-deploy 4.1.0's installer writes
// kubelet_root_dir = "/var/lib/k0s/kubelet" on k0s
// (tools/packaging/kata-deploy/binary/src/artifacts/install.rs,
// generate_k0s_kubelet_root_drop_in); k0s docs "Configuration" (kubelet
// root /var/lib/k0s/kubelet); microk8s runs its kubelet with --root-dir
// ${SNAP_COMMON}/var/lib/kubelet (microk8s's default args/kubelet).
var kubeletRoots = [...]string{
	K0s:      "var/lib/k0s/kubelet",
	MicroK8s: "var/snap/microk8s/common/var/lib/kubelet",
}

// KubeletRoot returns the kubelet's root directory on the distribution,
// relative to the host root.
func (d Distribution) KubeletRoot() string {
	if int(d) < len(kubeletRoots) && kubeletRoots[d] != "" {
		return kubeletRoots[d]
	}
	return "var/lib/kubelet"
}

// PodResourcesSocket returns the kubelet's pod-resources socket on the
// distribution, as an absolute path on the node: Kata's cold plug of VFIO
// devices asks it for the pod's GPUs (Kata Containers 4.1
// configuration-qemu-nvidia-gpu*.toml.in, pod_resource_api_sock).
func (d Distribution) PodResourcesSocket() string {
	return "/" + d.KubeletRoot() + "/pod-resources/kubelet.sock"
}

// UserLayout reports whether the runtime layout of the distribution is
// given by the user where it is used (custom), not known to berth.
func (d Distribution) UserLayout() bool { _, ok := layoutOf(d); return d.Valid() && !ok }

// DefaultDistribution is the distribution of a node on which discovery
// finds no distribution's markers: plain containerd in kubeadm's layout.
func DefaultDistribution() Distribution { return Kubeadm }

// UsesVhost reports whether the hypervisor attaches the agent's vsock and
// virtio-net through the host's vhost_vsock and vhost_net modules (QEMU);
// Cloud Hypervisor and Firecracker use a hybrid vsock over a Unix socket.
func (h Hypervisor) UsesVhost() bool { r, _ := hypervisorRowOf(h); return r.vhost }

// HasProbe reports whether berth has a functional probe for the
// hypervisor (starting it once without a guest): QEMU.
func (h Hypervisor) HasProbe() bool { r, _ := hypervisorRowOf(h); return r.probe }

// PassesPCI reports whether the hypervisor can pass PCI devices (VFIO)
// through to the guest; Firecracker cannot.
func (h Hypervisor) PassesPCI() bool { r, _ := hypervisorRowOf(h); return r.vfio }
