// Package platform is berth's model of a sandboxed or confidential container
// platform: the product of a Kubernetes distribution, a hypervisor, a TEE
// (optionally pinned to an SNP product line), a snapshotter and the gpu and
// debug variants. Only combinations that the rules in rules.go allow can be
// built: a Platform value is valid by construction.
package platform

import (
	"strings"
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
	// canon and label are the canonical form and its DNS-label twin,
	// rendered once at construction: checks, reports and labels ask for
	// them hundreds of times per evaluation.
	canon, label string
}

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
// first broken rule ("" if none). It is the hot path of All and of the
// suggestions, so it builds no Rule values.
func build(s Spec) (Platform, string) {
	if !s.Distribution.Valid() || !s.Hypervisor.Valid() || !s.TEE.Valid() || !s.ProductLine.Valid() ||
		(s.Snapshotter != 0 && !s.Snapshotter.Valid()) {
		return Platform{}, "spec-complete"
	}
	p := Platform{dist: s.Distribution, hv: s.Hypervisor, tee: s.TEE, pl: s.ProductLine,
		snap: s.Snapshotter, gpu: s.GPU, debug: s.Debug}
	if p.snap == 0 {
		p.snap = defaultSnapshotter(p)
	}
	for _, c := range checks() {
		if !c.ok(p) {
			return Platform{}, c.id
		}
	}
	p.canon = formatSpec(p.Spec())
	p.label = strings.ReplaceAll(p.canon, "+", "-")
	return p, ""
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
	case p.tee != NoTEE:
		return Nydus
	}
	// GPU platforms without a TEE stay on overlayfs: Kata's Go-runtime
	// class kata-qemu-nvidia-gpu shares the rootfs over virtio-fs. EROFS is
	// the choice of the newer runtime-rs NVIDIA handler (Kata PR #13363,
	// 2026) and needs containerd >= 2.1, so it is opt-in with +erofs.
	return Overlayfs
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
		Snapshotter: p.snap, GPU: p.gpu, Debug: p.debug}
}

// String returns the canonical form:
// distribution-hypervisor-tee[-productline][+gpu][+debug][+snapshotter],
// the snapshotter only when it differs from the platform's default.
func (p Platform) String() string {
	p.must()
	return p.canon
}

// formatSpec renders a spec in canonical form without validating it, so
// that errors and suggestions can show invalid inputs the same way.
func formatSpec(s Spec) string {
	var b strings.Builder
	b.WriteString(s.Distribution.String())
	b.WriteByte('-')
	b.WriteString(s.Hypervisor.String())
	b.WriteByte('-')
	b.WriteString(s.TEE.String())
	if s.ProductLine != AnyProductLine {
		b.WriteByte('-')
		b.WriteString(s.ProductLine.String())
	}
	if s.GPU {
		b.WriteString("+gpu")
	}
	if s.Debug {
		b.WriteString("+debug")
	}
	if s.Snapshotter != 0 {
		def := defaultSnapshotter(Platform{dist: s.Distribution, hv: s.Hypervisor, tee: s.TEE, gpu: s.GPU})
		if s.Snapshotter != def {
			b.WriteByte('+')
			b.WriteString(s.Snapshotter.String())
		}
	}
	return b.String()
}

// Name returns a Kubernetes DNS-1123 label derived from the canonical form
// ('+' becomes '-'), for handler, RuntimeClass and label names. It is unique
// per platform because no dimension value is spelled like another.
func (p Platform) Name() string {
	p.must()
	return p.label
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
	return p.snap == Nydus || (p.tee != NoTEE && p.snap == Overlayfs)
}

// SharedFS is Kata's shared_fs setting: "none" when nothing is shared with
// the host (Firecracker has no virtio-fs; guest-pull platforms keep the image
// inside the guest), otherwise "virtio-fs".
func (p Platform) SharedFS() string {
	p.must()
	if p.hv == Firecracker || p.GuestPull() {
		return "none"
	}
	return "virtio-fs"
}

// KataRuntimeClass returns the upstream Kata runtime class (kata-deploy
// shim) this platform corresponds to. The distribution, product line,
// snapshotter and debug variant do not change the class, except that guest
// pull without a TEE is kata-qemu-coco-dev. AKS has no upstream class: it
// gets AKS's own RuntimeClass, kata-cc-isolation (handler kata-cc, shim
// io.containerd.kata-cc.v2, from Microsoft's Kata fork).
func (p Platform) KataRuntimeClass() string {
	p.must()
	if p.dist == AKS {
		return "kata-cc-isolation"
	}
	return "kata-" + p.kataShim()
}

// KataConfigFile returns the Kata configuration file of the runtime class,
// e.g. "configuration-qemu-snp.toml"; on AKS the kata-cc handler's
// configuration-clh-snp.toml.
func (p Platform) KataConfigFile() string { p.must(); return "configuration-" + p.kataShim() + ".toml" }

func (p Platform) kataShim() string {
	s := p.hv.Short()
	if p.gpu {
		s += "-nvidia-gpu"
	}
	switch {
	case p.tee != NoTEE:
		s += "-" + p.tee.String()
	case p.snap == Nydus:
		s += "-coco-dev"
	}
	return s
}

// PodOverhead returns the RuntimeClass pod overhead kata-deploy declares for
// the corresponding runtime class (FACTS.md §6). The AKS class has no
// upstream figure; it gets the confidential one.
func (p Platform) PodOverhead() Overhead {
	p.must()
	switch {
	case p.gpu:
		return Overhead{MemoryMiB: 10240, MilliCPU: 1000}
	case p.tee != NoTEE:
		return Overhead{MemoryMiB: 2048, MilliCPU: 1000}
	case p.snap == Nydus: // kata-qemu-coco-dev
		return Overhead{MemoryMiB: 160, MilliCPU: 250}
	case p.hv == QEMU:
		return Overhead{MemoryMiB: 320, MilliCPU: 250}
	}
	return Overhead{MemoryMiB: 130, MilliCPU: 250}
}

// DefaultMemoryMiB is Kata's default_memory for the guest: 8 GiB for the
// NVIDIA GPU configurations, 2 GiB otherwise.
func (p Platform) DefaultMemoryMiB() int {
	p.must()
	if p.gpu {
		return 8192
	}
	return 2048
}

// All returns every valid platform in a stable order: distributions,
// hypervisors, TEEs, product lines, then gpu, debug and snapshotter, each
// in its canonical order. Other packages' golden files depend on this
// order: change it only together with them.
func All() []Platform {
	var out []Platform
	pls := append([]ProductLine{AnyProductLine}, ProductLines()...)
	for _, d := range Distributions() {
		for _, h := range Hypervisors() {
			for _, t := range TEEs() {
				for _, pl := range pls {
					for _, gpu := range []bool{false, true} {
						for _, debug := range []bool{false, true} {
							for _, sn := range Snapshotters() {
								p, id := build(Spec{d, h, t, pl, sn, gpu, debug})
								if id == "" {
									out = append(out, p)
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}
