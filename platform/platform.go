// Package platform is berth's model of a sandboxed or confidential container
// platform: the product of a Kubernetes distribution, a hypervisor, a TEE
// (optionally pinned to an SNP product line), a snapshotter and the gpu and
// debug variants. Only combinations that the rules in rules.go allow can be
// built: a Platform value is valid by construction.
package platform

import (
	"bytes"
)

// Spec is the plain, unvalidated description of a platform; New turns it
// into a Platform. A zero Snapshotter means the platform's default; a zero
// ProductLine means not pinned. Distribution, Hypervisor and TEE must be set.
type Spec struct {
	Distribution Distribution `json:"distribution"`
	Hypervisor   Hypervisor   `json:"hypervisor"`
	TEE          TEE          `json:"tee"`
	ProductLine  ProductLine  `json:"productLine,omitempty"`
	Snapshotter  Snapshotter  `json:"snapshotter,omitempty"`
	GPU          bool         `json:"gpu,omitempty"`
	Debug        bool         `json:"debug,omitempty"`
	// KataRuntime is Kata's Go or Rust runtime; zero means the
	// hypervisor's default (Go where both exist).
	KataRuntime KataRuntime `json:"kataRuntime,omitempty"`
	// NvidiaCPU selects NVIDIA's guest image without a GPU
	// (kata-qemu-nvidia-cpu): the NVIDIA guest stack for CPU-only pods.
	NvidiaCPU bool `json:"nvidiaCpu,omitempty"`
}

// Platform is one valid platform. Its fields are unexported so that only New
// and Parse (and UnmarshalText) can make one; the zero value is invalid and
// every method on it panics. Platforms are comparable with ==.
type Platform struct {
	dist  Distribution
	hv    Hypervisor
	tee   TEE
	pl    ProductLine
	snap  Snapshotter
	gpu   bool
	debug bool
	rt    KataRuntime
	nvcpu bool
	// local is the hypervisor's (Local), which every check's Applies asks.
	local bool
	// names holds the canonical form, its DNS-label twin and the
	// kata-deploy shim (Shim), rendered once at construction: checks,
	// reports and labels ask for them hundreds of times per evaluation.
	// The canonical form ends at canonEnd, the label at labelEnd, except
	// that labelEnd == canonEnd when the label is the canonical form
	// itself; the shim is the rest. One string rather than three keeps a
	// Platform, which checks take by value, at half the size.
	names              string
	canonEnd, labelEnd uint16
}

func (p *Platform) canon() string { return p.names[:p.canonEnd] }

func (p *Platform) label() string {
	if p.labelEnd == p.canonEnd {
		return p.names[:p.canonEnd]
	}
	return p.names[p.canonEnd:p.labelEnd]
}

func (p *Platform) shim() string { return p.names[p.labelEnd:] }

// Overhead is the pod overhead a RuntimeClass declares for the sandbox VM.
type Overhead struct {
	MemoryMiB int `json:"memoryMiB"`
	MilliCPU  int `json:"milliCPU"`
}

const zeroPanic = "platform: use of zero Platform; build one with platform.New or platform.Parse"

// must panics on the zero Platform: a zero value reaching a method is a
// programming error that would otherwise configure nodes for a platform
// nobody chose.
func (p Platform) must() {
	if p.dist == 0 {
		panic(zeroPanic)
	}
}

// New validates s against the rules and returns the platform, or a
// *ValidationError naming the broken rule and suggesting valid neighbours.
func New(s Spec) (Platform, error) {
	p, id := build(s)
	if id != "" {
		return Platform{}, newValidationError(rule(id), s, formatSpec(s))
	}
	return p, nil
}

// build resolves defaults and applies the rules; it reports the ID of the
// first broken rule ("" if none). It is the hot path of the suggestions,
// so it builds no Rule values.
func build(s Spec) (Platform, string) {
	if !s.Distribution.Valid() || !s.Hypervisor.Valid() || !s.TEE.Valid() || !s.ProductLine.Valid() ||
		(s.Snapshotter != 0 && !s.Snapshotter.Valid()) || (s.KataRuntime != 0 && !s.KataRuntime.Valid()) {
		return Platform{}, "spec-complete"
	}
	p := Platform{dist: s.Distribution, hv: s.Hypervisor, tee: s.TEE, pl: s.ProductLine,
		snap: s.Snapshotter, gpu: s.GPU, debug: s.Debug, rt: s.KataRuntime, nvcpu: s.NvidiaCPU}
	if p.rt == 0 {
		p.rt = defaultKataRuntime(p.hv)
	}
	if p.snap == 0 {
		p.snap = defaultSnapshotter(p)
	}
	for _, c := range checks() {
		if !c.ok(p) {
			return Platform{}, c.id
		}
	}
	p.render()
	return p, ""
}

// render sets what a valid platform carries besides its dimensions: its
// names (canonical form, DNS label, shim) from one allocation, since All
// renders some 1,200 platforms per run and three strings each, built
// piece by piece, were most of its allocations; and Local.
func (p *Platform) render() {
	var buf [192]byte
	b := appendSpec(buf[:0], p.Spec())
	n := len(b)
	m := n
	if bytes.IndexByte(b, '+') >= 0 {
		b = append(b, b[:n]...)
		for i := n; i < len(b); i++ {
			if b[i] == '+' {
				b[i] = '-'
			}
		}
		m = len(b)
	}
	b = appendShim(b, *p)
	p.names, p.canonEnd, p.labelEnd = string(b), uint16(n), uint16(m)
	r, _ := hypervisorRowOf(p.hv)
	p.local = r.local
}

// defaultSnapshotter is the image path a platform uses unless told
// otherwise: what Kata's runtime class of that kind is deployed with.
func defaultSnapshotter(p Platform) Snapshotter {
	switch {
	case p.dist.Runtime() == CRIO:
		// CRI-O has no snapshotters; containers/storage overlay is the only path.
		return Overlayfs
	case p.hv == Firecracker:
		return Devmapper
	case p.dist == AKS && p.tee != NoTEE:
		// Confidential Containers on AKS (kata-cc, Contrast's
		// AKS-CLH-SNP) pull on the host with the tardev snapshotter:
		// edgelesssys/contrast node-installer/testdata/expected-aks-clh-snp.toml.
		return Tardev
	case p.tee != NoTEE, p.hv == Remote:
		// kata-deploy's qemu-snp/-tdx and remote shims default to nydus.
		return Nydus
	}
	// GPU platforms without a TEE stay on overlayfs: Kata's Go-runtime
	// class kata-qemu-nvidia-gpu shares the rootfs over virtio-fs. EROFS is
	// the choice of the newer runtime-rs NVIDIA handler (Kata PR #13363,
	// 2026) and needs containerd >= 2.1, so it is opt-in with +erofs.
	return Overlayfs
}

// defaultKataRuntime is the first runtime kata-deploy ships h with: Go where
// both exist, so that berth's names and kata-deploy's classes without
// -runtime-rs mean the same thing.
func defaultKataRuntime(h Hypervisor) KataRuntime {
	if r, ok := hypervisorRowOf(h); ok && r.runtimes[0] != 0 {
		return r.runtimes[0]
	}
	return GoRuntime
}

// Distribution returns the Kubernetes distribution.
func (p Platform) Distribution() Distribution { p.must(); return p.dist }

// Hypervisor returns the hypervisor.
func (p Platform) Hypervisor() Hypervisor { p.must(); return p.hv }

// TEE returns the TEE (NoTEE for a non-confidential platform).
func (p Platform) TEE() TEE { p.must(); return p.tee }

// ProductLine returns the SNP product line pin, AnyProductLine if unpinned.
func (p Platform) ProductLine() ProductLine { p.must(); return p.pl }

// Snapshotter returns the snapshotter, with the default already resolved.
func (p Platform) Snapshotter() Snapshotter { p.must(); return p.snap }

// DefaultSnapshotter returns the snapshotter this platform would use if none
// were chosen explicitly.
func (p Platform) DefaultSnapshotter() Snapshotter { p.must(); return defaultSnapshotter(p) }

// GPU reports whether the platform passes a GPU through to the guest.
func (p Platform) GPU() bool { p.must(); return p.gpu }

// Debug reports whether the platform uses debug guest images.
func (p Platform) Debug() bool { p.must(); return p.debug }

// HypervisorDevice returns the device node, relative to the host root,
// through which the node's hypervisor runs sandbox VMs: dev/kvm, or on AKS,
// whose Kata runs on the Hyper-V root partition, dev/mshv; "" for peer
// pods, whose VM runs in a cloud.
func (p Platform) HypervisorDevice() string {
	p.must()
	switch {
	case !p.Local():
		return ""
	case p.dist == AKS:
		return "dev/mshv"
	}
	return "dev/kvm"
}

// KataRuntime returns Kata's runtime (Go or Rust), the default resolved.
func (p Platform) KataRuntime() KataRuntime { p.must(); return p.rt }

// NvidiaCPU reports whether the platform uses NVIDIA's guest image without
// a GPU (kata-qemu-nvidia-cpu).
func (p Platform) NvidiaCPU() bool { p.must(); return p.nvcpu }

// Local reports whether the sandbox VM runs on the node itself (false for
// peer pods, whose VM runs in a cloud): only then do the node's KVM, CPU
// and firmware matter.
func (p Platform) Local() bool {
	p.must()
	return p.local
}

// Confidential reports whether the guest runs in a TEE.
func (p Platform) Confidential() bool { p.must(); return p.tee != NoTEE }

// Valid reports whether p was built by New or Parse (false only for the
// zero value; it is the one method that does not panic on it).
func (p Platform) Valid() bool { return p.dist != 0 }

// Spec returns the fully resolved description (the snapshotter is explicit),
// so New(p.Spec()) == p.
func (p Platform) Spec() Spec {
	p.must()
	return Spec{Distribution: p.dist, Hypervisor: p.hv, TEE: p.tee, ProductLine: p.pl,
		Snapshotter: p.snap, GPU: p.gpu, Debug: p.debug, KataRuntime: p.rt, NvidiaCPU: p.nvcpu}
}

// String returns the canonical form:
// distribution-hypervisor-tee[-productline][+gpu|+nvidia-cpu][+debug][+rust][+snapshotter],
// the runtime and the snapshotter only when they differ from the
// platform's default.
func (p Platform) String() string {
	p.must()
	return p.canon()
}

// formatSpec renders a spec in canonical form without validating it, so
// that errors and suggestions can show invalid inputs the same way.
func formatSpec(s Spec) string {
	var buf [128]byte
	return string(appendSpec(buf[:0], s))
}

// appendSpec appends formatSpec(s) to b.
func appendSpec(b []byte, s Spec) []byte {
	b = append(b, s.Distribution.String()...)
	b = append(b, '-')
	b = append(b, s.Hypervisor.String()...)
	b = append(b, '-')
	b = append(b, s.TEE.String()...)
	if s.ProductLine != AnyProductLine {
		b = append(b, '-')
		b = append(b, s.ProductLine.String()...)
	}
	if s.GPU {
		b = append(b, "+gpu"...)
	}
	if s.NvidiaCPU {
		b = append(b, "+nvidia-cpu"...)
	}
	if s.Debug {
		b = append(b, "+debug"...)
	}
	if s.KataRuntime != 0 && s.KataRuntime != defaultKataRuntime(s.Hypervisor) {
		b = append(b, '+')
		b = append(b, s.KataRuntime.String()...)
	}
	if s.Snapshotter != 0 {
		def := defaultSnapshotter(Platform{dist: s.Distribution, hv: s.Hypervisor, tee: s.TEE, gpu: s.GPU})
		if s.Snapshotter != def {
			b = append(b, '+')
			b = append(b, s.Snapshotter.String()...)
		}
	}
	return b
}

// Name returns a Kubernetes DNS-1123 label derived from the canonical form
// ('+' becomes '-'), for handler, RuntimeClass and label names. It is unique
// per platform because no dimension value is spelled like another.
func (p Platform) Name() string {
	p.must()
	return p.label()
}

// MarshalText encodes the canonical form. It panics on the zero Platform
// like every other method.
func (p Platform) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses any form Parse accepts.
func (p *Platform) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// GuestPull reports whether images are pulled inside the guest rather than
// on the host: with nydus, and on confidential platforms with overlayfs,
// where berth sets Kata's experimental_force_guest_pull (on CRI-O the
// equivalent is the runtime's runtime_pull_image).
func (p Platform) GuestPull() bool {
	p.must()
	return p.snap.PullsInGuest() || p.ForcedGuestPull()
}

// ForcedGuestPull reports whether the guest pulls images although the
// snapshotter would not have it do so: confidential platforms on
// overlayfs, where berth sets Kata's experimental_force_guest_pull.
func (p Platform) ForcedGuestPull() bool {
	p.must()
	return p.tee != NoTEE && p.snap == Overlayfs
}

// SharedFS is Kata's shared_fs setting: "none" when nothing is shared with
// the host (Firecracker has no virtio-fs, peer pods run elsewhere,
// guest-pull platforms keep the image inside the guest), "inline-virtio-fs"
// for Dragonball (virtio-fs served by the shim itself), otherwise
// "virtio-fs".
func (p Platform) SharedFS() string {
	p.must()
	// The Rust runtime's NVIDIA shims run a QEMU built without a shared
	// file system (runtime-rs configuration-qemu-nvidia-*-runtime-rs:
	// QEMUNOSHAREDFSPATH, shared_fs = "none").
	if p.GuestPull() || (p.rt == RustRuntime && (p.gpu || p.nvcpu)) {
		return "none"
	}
	if r, _ := snapshotterRowOf(p.snap); r.noSharedFS {
		return "none"
	}
	r, _ := hypervisorRowOf(p.hv)
	return r.sharedFS
}

// Shim returns the kata-deploy shim this platform is (e.g. "qemu-snp",
// "qemu-nvidia-gpu-tdx-runtime-rs", "clh-azure"): the name of its Kata
// configuration file and, with "kata-" in front, of its RuntimeClass and
// containerd handler. The distribution (except AKS, whose Hyper-V builds
// are the -azure shims), product line, snapshotter and debug variant do
// not change the shim, except that guest pull without a TEE on QEMU is
// qemu-coco-dev. Confidential AKS is Microsoft's kata-cc handler, which
// kata-deploy does not ship: Shim returns "" for it.
func (p Platform) Shim() string {
	p.must()
	return p.shim()
}

// shimOf computes Shim when the platform is built.
func shimOf(p Platform) string {
	var buf [64]byte
	return string(appendShim(buf[:0], p))
}

// appendShim appends shimOf(p) to b.
func appendShim(b []byte, p Platform) []byte {
	if p.dist == AKS && p.tee != NoTEE {
		return b
	}
	r, _ := hypervisorRowOf(p.hv)
	b = append(b, r.short...)
	if p.dist == AKS {
		b = append(b, "-azure"...)
	}
	switch {
	case p.gpu:
		b = append(b, "-nvidia-gpu"...)
	case p.nvcpu:
		b = append(b, "-nvidia-cpu"...)
	}
	switch {
	case p.tee != NoTEE:
		b = append(b, '-')
		b = append(b, p.tee.String()...)
	case p.snap == Nydus && p.hv == QEMU:
		b = append(b, "-coco-dev"...)
	}
	if p.rt == RustRuntime && r.rsSuffix {
		b = append(b, "-runtime-rs"...)
	}
	return b
}

// TemplateShim returns the kata-deploy shim whose Kata configuration
// template this platform's configuration starts from: Shim, or for
// confidential AKS (Microsoft's kata-cc, which kata-deploy does not ship)
// the Hyper-V Cloud Hypervisor shim of the same runtime (clh-azure,
// clh-azure-runtime-rs).
func (p Platform) TemplateShim() string {
	p.must()
	if sh := p.shim(); sh != "" {
		return sh
	}
	q := p
	q.tee = NoTEE
	return shimOf(q)
}

// KataRuntimeClass returns the RuntimeClass name users have for this
// platform: kata-deploy's kata-<shim>, or kata-<shim>-debug for the debug
// variant (the class kata-deploy creates with debug: true). Confidential
// AKS gets AKS's own class, kata-cc-isolation (handler kata-cc, from
// Microsoft's Kata fork).
func (p Platform) KataRuntimeClass() string {
	p.must()
	if p.Shim() == "" {
		return "kata-cc-isolation"
	}
	return p.Handler()
}

// Handler returns the containerd (or CRI-O) runtime handler name: the same
// as the RuntimeClass name, as kata-deploy registers it, except on
// confidential AKS (kata-cc). Two platforms that differ only in the
// distribution, product line or snapshotter share a handler: a node
// carries one of them at a time.
func (p Platform) Handler() string {
	p.must()
	shim := p.Shim()
	if shim == "" {
		return "kata-cc"
	}
	h := "kata-" + shim
	if p.debug {
		h += "-debug"
	}
	return h
}

// KataConfigFile returns the Kata configuration file of the shim, e.g.
// "configuration-qemu-snp.toml"; on confidential AKS the kata-cc handler's
// configuration-clh-snp.toml.
func (p Platform) KataConfigFile() string {
	p.must()
	shim := p.Shim()
	if shim == "" {
		shim = "clh-snp"
	}
	return "configuration-" + shim + ".toml"
}

// KataSection returns the [hypervisor.<name>] table of Kata's
// configuration that configures this platform's hypervisor.
func (p Platform) KataSection() string {
	p.must()
	r, _ := hypervisorRowOf(p.hv)
	return r.section
}

// HypervisorBinary returns the file name of the hypervisor's executable as
// Kata's static build installs it under <prefix>/bin, or "" when no
// separate binary runs (Dragonball is linked into the Rust runtime's shim;
// peer pods start their VM in a cloud).
func (p Platform) HypervisorBinary() string {
	p.must()
	r, _ := hypervisorRowOf(p.hv)
	return r.binary
}

// GuestFirmware returns the file name of the guest firmware a confidential
// QEMU guest boots from (AMDSEV.fd, OVMF.inteltdx.fd), or "".
func (p Platform) GuestFirmware() string {
	p.must()
	if p.hv != QEMU {
		return ""
	}
	return teeRowOf(p.tee).firmware
}

// MeasuredLaunch reports whether berth can compute the launch measurement
// (reference values) of the platform's guests: confidential QEMU guests
// booted from the TEE's guest firmware.
func (p Platform) MeasuredLaunch() bool {
	p.must()
	return p.GuestFirmware() != ""
}

// KataGoQEMU reports whether the platform's guests are QEMU guests of
// Kata's Go runtime, the runtime whose guest kernel command line berth
// derives from the Kata configuration (refvalues).
func (p Platform) KataGoQEMU() bool {
	p.must()
	return p.rt == GoRuntime && p.hv == QEMU
}

// MinHypervisorVersion returns the oldest upstream hypervisor release that
// can launch this platform's guests, or nil when any will do: QEMU 9.1 for
// SEV-SNP and 10.1 for TDX.
func (p Platform) MinHypervisorVersion() []int {
	p.must()
	if p.hv != QEMU {
		return nil
	}
	return append([]int(nil), teeRowOf(p.tee).minQEMU...)
}

// NFDLabel returns the node label kata-deploy's NodeFeatureRule publishes
// on nodes where this platform's TEE is enabled (and its RuntimeClasses
// select on), or "" without a TEE.
func (t TEE) NFDLabel() string { return teeRowOf(t).nfdLabel }

// NFDBuiltinLabel returns Node Feature Discovery's own cpu-security label
// for the TEE, or "".
func (t TEE) NFDBuiltinLabel() string { return teeRowOf(t).nfdBuiltinLabel }

// KeyResource returns the extended resource that counts the TEE's guest
// keys on a node as kata-deploy's NodeFeatureRule publishes it
// (sev-snp.amd.com/esids, tdx.intel.com/keys), or "".
func (t TEE) KeyResource() string { return teeRowOf(t).keyResource }

// Display returns the vendor's name of the TEE ("AMD SEV-SNP").
func (t TEE) Display() string { return teeRowOf(t).display }

// Display returns the hypervisor's proper name ("Cloud Hypervisor").
func (h Hypervisor) Display() string {
	r, _ := hypervisorRowOf(h)
	return r.display
}

// Runtimes returns the Kata runtimes kata-deploy ships this hypervisor
// with, the default first.
func (h Hypervisor) Runtimes() []KataRuntime {
	r, _ := hypervisorRowOf(h)
	return r.shipped()
}

// ShimNodeSelector returns the node selector kata-deploy's chart gives this
// platform's RuntimeClass besides its own ownership label: the GPU
// operator's cc.ready.state label for GPU shims (with the TEE's label for
// confidential GPU shims). Nil for the others.
func (p Platform) ShimNodeSelector() map[string]string {
	p.must()
	return shimNodeSelectors(p.gpu, p.tee)
}

// PodOverhead returns the RuntimeClass pod overhead kata-deploy declares
// for the platform's shim. Confidential AKS (kata-cc) has no kata-deploy
// figure; it gets the confidential one.
func (p Platform) PodOverhead() Overhead {
	p.must()
	if o, ok := shimOverheads[p.shim()]; ok {
		return o
	}
	return teeOverhead
}

// DefaultMemoryMiB is Kata's default_memory for the guest: 8 GiB for the
// NVIDIA GPU configurations, 256 MiB on confidential AKS, 2 GiB otherwise.
// Confidential AKS sizes its VMs statically: 256 MiB for the guest's own
// components plus the containers' memory limits, or
// StaticWorkloadMemoryMiB when they set none (edgelesssys/contrast
// node-installer/platforms/platforms.go DefaultMemoryInMegaBytes: 256 for
// AKSCloudHypervisorSNP; node-installer/internal/constants/constants.go:
// static_sandbox_resource_mgmt, static_sandbox_default_workload_mem 1792).
func (p Platform) DefaultMemoryMiB() int {
	p.must()
	switch {
	case p.gpu:
		return 8192
	case p.StaticWorkloadMemoryMiB() > 0:
		return 256
	}
	return 2048
}

// StaticWorkloadMemoryMiB is the memory a statically sized sandbox VM
// gets for containers without memory limits
// (static_sandbox_default_workload_mem of Microsoft's Kata, which the
// kata-cc handler reads), or 0 where the platform does not size its VMs
// that way: 1792 MiB on confidential AKS, so that such a VM has the
// 2048 MiB of the others.
func (p Platform) StaticWorkloadMemoryMiB() int {
	p.must()
	if p.shim() == "" {
		return 1792
	}
	return 0
}

// All returns every valid platform in a stable order: distributions,
// hypervisors, Kata runtimes, TEEs, product lines, then image variant,
// debug and snapshotter, each in its canonical order. Other packages'
// golden files depend on this order: change it only together with them
// (TestAllOrder holds it to that nesting).
func All() []Platform {
	// Counted first, so that the list is allocated once: growing it
	// left as much garbage as the list itself.
	n := 0
	for _, d := range Distributions() {
		n += countFor(d)
	}
	out := make([]Platform, 0, n)
	for _, d := range Distributions() {
		out = appendAllFor(out, d)
	}
	return out
}

// AllFor returns the valid platforms of one distribution, in All's order.
// A host runs one distribution, so its checks need an eighth of All.
func AllFor(d Distribution) []Platform { return appendAllFor(make([]Platform, 0, countFor(d)), d) }

// appendAllFor appends AllFor(d) to out. It walks the dimensions as
// build would be called on each spec, but tries the rules that do not
// read the snapshotter once per spec without it, and makes each debug
// variant from its valid base, since no rule reads the debug variant
// (TestRuleDimensions): about 9,000 builds become 1,200 renders.
func appendAllFor(out []Platform, d Distribution) []Platform {
	snaps := Snapshotters()
	eachSpec(d, func(rules *[numChecks]check, p Platform) {
		base := len(out)
		for _, sn := range snaps {
			p.snap = sn
			if holds(rules, p, true) {
				q := p
				q.render()
				out = append(out, q)
			}
		}
		for i, n := base, len(out); i < n; i++ {
			q := out[i]
			q.debug = true
			q.render()
			out = append(out, q)
		}
	})
	return out
}

// countFor returns len(AllFor(d)) without rendering a platform.
func countFor(d Distribution) int {
	n := 0
	snaps := Snapshotters()
	eachSpec(d, func(rules *[numChecks]check, p Platform) {
		for _, sn := range snaps {
			p.snap = sn
			if holds(rules, p, true) {
				n += 2 // and its debug variant
			}
		}
	})
	return n
}

// eachSpec calls fn, in All's order, with each platform of distribution
// d without snapshotter and debug variant that keeps the rules not
// reading the snapshotter.
func eachSpec(d Distribution, fn func(rules *[numChecks]check, p Platform)) {
	rules := checks()
	pls := append([]ProductLine{AnyProductLine}, ProductLines()...)
	tees, vars := TEEs(), variants()
	for _, h := range Hypervisors() {
		r, _ := hypervisorRowOf(h)
		for _, rt := range r.runtimes {
			if rt == 0 {
				continue
			}
			for _, t := range tees {
				for _, pl := range pls {
					// productline-snp-only and gpu-qemu-only need
					// no platform to tell.
					if pl != AnyProductLine && t != SNP {
						continue
					}
					for _, v := range vars {
						if (v.gpu || v.nvcpu) && h != QEMU {
							continue
						}
						p := Platform{dist: d, hv: h, tee: t, pl: pl, gpu: v.gpu, rt: rt, nvcpu: v.nvcpu}
						if holds(&rules, p, false) {
							fn(&rules, p)
						}
					}
				}
			}
		}
	}
}

// holds reports whether p keeps the rules that read the snapshotter (snap)
// or those that do not (!snap).
func holds(rules *[numChecks]check, p Platform, snap bool) bool {
	for i := range rules {
		if c := &rules[i]; c.snap == snap && !c.ok(p) {
			return false
		}
	}
	return true
}

// variants are the guest image variants in canonical order: Kata's
// standard image, NVIDIA's GPU image, NVIDIA's CPU-only image.
func variants() []struct{ gpu, nvcpu bool } {
	return []struct{ gpu, nvcpu bool }{{false, false}, {true, false}, {false, true}}
}
