package platform

import (
	"fmt"
	"slices"
	"strings"
)

// Every dimension is a small closed integer type. The zero value of
// Distribution, Hypervisor, TEE and Snapshotter is deliberately not a
// member, so that a forgotten field is detected instead of silently meaning
// "the first one". ProductLine is the exception: its zero value,
// AnyProductLine, means "not pinned", which is the common case.

// Distribution is the Kubernetes distribution of a node: it decides where the
// container runtime keeps its configuration (see Layout).
type Distribution uint8

// The distributions berth knows. A new distribution is one constant here, one
// case in info and one row in the layouts table.
const (
	Kubeadm Distribution = iota + 1
	K3s
	RKE2
	K0s
	MicroK8s
	AKS
	OpenShift
	Custom
)

// Distributions returns every distribution in canonical order.
func Distributions() []Distribution {
	return []Distribution{Kubeadm, K3s, RKE2, K0s, MicroK8s, AKS, OpenShift, Custom}
}

func (d Distribution) info() (name, desc string) {
	switch d {
	case Kubeadm:
		return "kubeadm", "kubeadm or any plain containerd node"
	case K3s:
		return "k3s", "K3s (embedded containerd, config rendered from a template)"
	case RKE2:
		return "rke2", "RKE2 (embedded containerd, config rendered from a template)"
	case K0s:
		return "k0s", "k0s (embedded containerd, containerd.d drop-ins)"
	case MicroK8s:
		return "microk8s", "MicroK8s (snap containerd, config rendered from a template)"
	case AKS:
		return "aks", "Azure Kubernetes Service (Kata on Cloud Hypervisor over Hyper-V)"
	case OpenShift:
		return "openshift", "OpenShift (CRI-O)"
	case Custom:
		return "custom", "any other distribution; runtime paths are given at the point of use"
	}
	return "", ""
}

// String returns the canonical lowercase name, or "Distribution(N)" for a
// value outside the set.
func (d Distribution) String() string { return nameOr(d.info, "Distribution", uint8(d)) }

// Description is a one-line human description.
func (d Distribution) Description() string { _, desc := d.info(); return desc }

// Valid reports whether d is one of the named distributions.
func (d Distribution) Valid() bool { n, _ := d.info(); return n != "" }

// Layout returns where the distribution keeps its runtime configuration.
// It is false for Custom, whose layout the user supplies where it is used
// (for example through flags of `berth config`).
func (d Distribution) Layout() (Layout, bool) {
	l, ok := layoutOf(d)
	if !ok {
		return Layout{}, false
	}
	l.Units = append([]string(nil), l.Units...)
	l.Markers = append([]string(nil), l.Markers...)
	return l, true
}

// layoutOf returns the layouts entry of d; false for Custom and for a
// value outside the set.
func layoutOf(d Distribution) (Layout, bool) {
	if int(d) >= len(layouts) || layouts[d].Runtime == "" {
		return Layout{}, false
	}
	return layouts[d], true
}

// Runtime is the container runtime the distribution drives. Custom reports
// Containerd, the runtime `berth config` assumes unless told otherwise; its
// real runtime is part of the layout supplied at the point of use.
func (d Distribution) Runtime() Runtime {
	// The field is read in place (layoutOf copies the whole Layout), and
	// build asks this for every spec it tries.
	if int(d) < len(layouts) && layouts[d].Runtime != "" {
		return layouts[d].Runtime
	}
	return Containerd
}

// ParseDistribution parses a distribution name, case-insensitively. "metal"
// (Contrast's name for plain bare-metal Kubernetes) and "kubernetes" mean
// kubeadm.
func ParseDistribution(s string) (Distribution, error) {
	k := norm(s)
	switch k {
	case "metal", "kubernetes", "k8s", "containerd":
		return Kubeadm, nil
	case "ocp":
		return OpenShift, nil
	}
	for _, d := range Distributions() {
		if d.String() == k {
			return d, nil
		}
	}
	return 0, unknown("distribution", s, names(Distributions()))
}

// MarshalText encodes the canonical name; the zero value is an error.
func (d Distribution) MarshalText() ([]byte, error) {
	return marshal(d.Valid(), d.String(), "distribution")
}

// UnmarshalText parses any accepted spelling.
func (d *Distribution) UnmarshalText(b []byte) error { return unmarshal(d, b, ParseDistribution) }

// Hypervisor is the virtual machine monitor Kata uses for each pod sandbox.
// Everything berth knows about one (its Kata name, binary, configuration
// table, runtimes) is one row of hypervisorTable in table.go.
type Hypervisor uint8

// The hypervisors Kata Containers 4.1 ships configurations for on x86_64.
// Remote is not a local VMM: the sandbox is a peer-pods VM in a cloud,
// started through the cloud-api-adaptor.
const (
	QEMU Hypervisor = iota + 1
	CloudHypervisor
	Firecracker
	Dragonball
	StratoVirt
	OpenVMM
	Remote
)

// Hypervisors returns every hypervisor in canonical order.
func Hypervisors() []Hypervisor {
	return []Hypervisor{QEMU, CloudHypervisor, Firecracker, Dragonball, StratoVirt, OpenVMM, Remote}
}

func (h Hypervisor) info() (name, desc string) {
	r, ok := hypervisorRowOf(h)
	if !ok {
		return "", ""
	}
	return r.name, r.desc
}

// String returns the canonical lowercase name.
func (h Hypervisor) String() string { return nameOr(h.info, "Hypervisor", uint8(h)) }

// Description is a one-line human description.
func (h Hypervisor) Description() string { _, desc := h.info(); return desc }

// Valid reports whether h is one of the named hypervisors.
func (h Hypervisor) Valid() bool { n, _ := h.info(); return n != "" }

// Short is the abbreviation Kata uses in runtime class and file names
// ("qemu", "clh", "fc", "dragonball", ...).
func (h Hypervisor) Short() string {
	if r, ok := hypervisorRowOf(h); ok {
		return r.short
	}
	return h.String()
}

// ParseHypervisor parses a hypervisor name or one of Kata's abbreviations
// (clh, fc, db), case-insensitively.
func ParseHypervisor(s string) (Hypervisor, error) {
	k := norm(s)
	for _, r := range hypervisorTable() {
		if r.name == k || r.short == k || (k != "" && slices.Contains(r.aliases[:], k)) {
			return r.h, nil
		}
	}
	return 0, unknown("hypervisor", s, names(Hypervisors()))
}

// MarshalText encodes the canonical name; the zero value is an error.
func (h Hypervisor) MarshalText() ([]byte, error) {
	return marshal(h.Valid(), h.String(), "hypervisor")
}

// UnmarshalText parses any accepted spelling.
func (h *Hypervisor) UnmarshalText(b []byte) error { return unmarshal(h, b, ParseHypervisor) }

// KataRuntime is which of Kata's two runtimes (containerd shims) drives the
// sandbox: the Go runtime (containerd-shim-kata-v2 from src/runtime) or the
// Rust runtime (runtime-rs, the default of kata-deploy since Kata 4.0). The
// two read different configuration files and ship as different
// kata-deploy shims (kata-qemu vs kata-qemu-runtime-rs).
type KataRuntime uint8

// The runtimes. In a Spec the zero value means the hypervisor's default
// (the first runtime its table row lists); a Platform always holds one.
const (
	GoRuntime KataRuntime = iota + 1
	RustRuntime
)

// KataRuntimes returns both runtimes in canonical order.
func KataRuntimes() []KataRuntime { return []KataRuntime{GoRuntime, RustRuntime} }

func (r KataRuntime) info() (name, desc string) {
	row, _ := kataRuntimeRowOf(r)
	return row.name, row.desc
}

// String returns the canonical lowercase name ("go" or "rust").
func (r KataRuntime) String() string { return nameOr(r.info, "KataRuntime", uint8(r)) }

// Description is a one-line human description.
func (r KataRuntime) Description() string { _, desc := r.info(); return desc }

// Valid reports whether r is one of the named runtimes.
func (r KataRuntime) Valid() bool { n, _ := r.info(); return n != "" }

// ParseKataRuntime parses a runtime name case-insensitively; "rs" and
// "runtime-rs" (kata-deploy's shim suffix) mean rust, "golang" means go.
func ParseKataRuntime(s string) (KataRuntime, error) {
	switch k := norm(s); k {
	case "rs", "runtime-rs", "rust":
		return RustRuntime, nil
	case "go", "golang", "runtime-go":
		return GoRuntime, nil
	}
	return 0, unknown("Kata runtime", s, names(KataRuntimes()))
}

// MarshalText encodes the canonical name; the zero value is an error.
func (r KataRuntime) MarshalText() ([]byte, error) {
	return marshal(r.Valid(), r.String(), "Kata runtime")
}

// UnmarshalText parses any accepted spelling.
func (r *KataRuntime) UnmarshalText(b []byte) error { return unmarshal(r, b, ParseKataRuntime) }

// TEE is the trusted execution environment protecting the guest, if any.
type TEE uint8

// The TEEs. NoTEE is a real choice ("none"), distinct from the invalid zero.
const (
	NoTEE TEE = iota + 1
	SNP
	TDX
)

// TEEs returns every TEE in canonical order.
func TEEs() []TEE { return []TEE{NoTEE, SNP, TDX} }

func (t TEE) info() (name, desc string) {
	switch t {
	case NoTEE:
		return "none", "no TEE: a sandboxed but not confidential VM"
	case SNP:
		return "snp", "AMD SEV-SNP confidential VM"
	case TDX:
		return "tdx", "Intel TDX confidential VM (trust domain)"
	}
	return "", ""
}

// String returns the canonical lowercase name.
func (t TEE) String() string { return nameOr(t.info, "TEE", uint8(t)) }

// Description is a one-line human description.
func (t TEE) Description() string { _, desc := t.info(); return desc }

// Valid reports whether t is one of the named TEEs.
func (t TEE) Valid() bool { n, _ := t.info(); return n != "" }

// ParseTEE parses a TEE name case-insensitively ("sev-snp" means snp).
func ParseTEE(s string) (TEE, error) {
	switch k := norm(s); k {
	case "no", "off", "false", "notee":
		return NoTEE, nil
	case "sev-snp", "sevsnp", "amd-sev-snp":
		return SNP, nil
	case "intel-tdx":
		return TDX, nil
	default:
		for _, t := range TEEs() {
			if t.String() == k {
				return t, nil
			}
		}
	}
	return 0, unknown("TEE", s, names(TEEs()))
}

// MarshalText encodes the canonical name; the zero value is an error.
func (t TEE) MarshalText() ([]byte, error) { return marshal(t.Valid(), t.String(), "TEE") }

// UnmarshalText parses any accepted spelling.
func (t *TEE) UnmarshalText(b []byte) error { return unmarshal(t, b, ParseTEE) }

// ProductLine pins an SNP platform to one AMD EPYC generation. It matters
// for attestation: VCEK certificates and launch measurements (reference
// values) differ per product line. TDX has no product line.
type ProductLine uint8

// The product lines. AnyProductLine is the zero value and means "not
// pinned"; it prints as "".
const (
	AnyProductLine ProductLine = iota
	Milan
	Genoa
	Turin
)

// ProductLines returns the pinned product lines (without AnyProductLine).
func ProductLines() []ProductLine { return []ProductLine{Milan, Genoa, Turin} }

func (p ProductLine) info() (name, desc string) {
	if p == AnyProductLine {
		return "", "any SEV-SNP capable EPYC generation"
	}
	if r, ok := productLineRowOf(p); ok {
		return r.name, r.desc
	}
	return "?", ""
}

// String returns the canonical lowercase name; "" for AnyProductLine.
func (p ProductLine) String() string {
	n, _ := p.info()
	if n == "?" {
		return fmt.Sprintf("ProductLine(%d)", uint8(p))
	}
	return n
}

// Description is a one-line human description.
func (p ProductLine) Description() string { _, desc := p.info(); return desc }

// Valid reports whether p is AnyProductLine or a named product line.
func (p ProductLine) Valid() bool { n, _ := p.info(); return n != "?" }

// ParseProductLine parses a product line name case-insensitively; "" and
// "any" give AnyProductLine.
func ParseProductLine(s string) (ProductLine, error) {
	k := norm(s)
	if k == "" || k == "any" {
		return AnyProductLine, nil
	}
	// The CPU generations that certify as a product line (Bergamo and
	// Siena as Genoa) name it too.
	if p, ok := ProductLineOfCPU(k); ok {
		return p, nil
	}
	return 0, unknown("product line", s, names(ProductLines()))
}

// MarshalText encodes the canonical name ("" for AnyProductLine).
func (p ProductLine) MarshalText() ([]byte, error) {
	return marshal(p.Valid(), p.String(), "product line")
}

// UnmarshalText parses any accepted spelling.
func (p *ProductLine) UnmarshalText(b []byte) error { return unmarshal(p, b, ParseProductLine) }

// Snapshotter is how container images reach the guest: a containerd
// snapshotter on the host (or, on CRI-O, the containers/storage overlay
// driver, modelled as overlayfs).
type Snapshotter uint8

// The snapshotters. In a Spec the zero value means "the platform's default"
// (see Platform.Snapshotter); a Platform always holds a concrete one.
const (
	Overlayfs Snapshotter = iota + 1
	Nydus
	Devmapper
	Blockfile
	Erofs
	Tardev
)

// Snapshotters returns every snapshotter in canonical order.
func Snapshotters() []Snapshotter {
	return []Snapshotter{Overlayfs, Nydus, Devmapper, Blockfile, Erofs, Tardev}
}

func (s Snapshotter) info() (name, desc string) {
	r, _ := snapshotterRowOf(s)
	return r.name, r.desc
}

// String returns the canonical lowercase name.
func (s Snapshotter) String() string { return nameOr(s.info, "Snapshotter", uint8(s)) }

// Description is a one-line human description.
func (s Snapshotter) Description() string { _, desc := s.info(); return desc }

// Valid reports whether s is one of the named snapshotters.
func (s Snapshotter) Valid() bool { n, _ := s.info(); return n != "" }

// Block reports whether the snapshotter hands the guest a block device.
func (s Snapshotter) Block() bool { r, _ := snapshotterRowOf(s); return r.block }

// ParseSnapshotter parses a snapshotter name case-insensitively.
func ParseSnapshotter(s string) (Snapshotter, error) {
	k := norm(s)
	for _, r := range snapshotterRows {
		if r.name == k || (k != "" && slices.Contains(r.aliases[:], k)) {
			return r.s, nil
		}
	}
	return 0, unknown("snapshotter", s, names(Snapshotters()))
}

// MarshalText encodes the canonical name; the zero value is an error.
func (s Snapshotter) MarshalText() ([]byte, error) {
	return marshal(s.Valid(), s.String(), "snapshotter")
}

// UnmarshalText parses any accepted spelling.
func (s *Snapshotter) UnmarshalText(b []byte) error { return unmarshal(s, b, ParseSnapshotter) }

// helpers shared by the dimension types.

func norm(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

func nameOr(info func() (string, string), typ string, v uint8) string {
	if n, _ := info(); n != "" {
		return n
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

func names[T fmt.Stringer](vs []T) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return strings.Join(out, ", ")
}

func unknown(what, got, want string) error {
	return fmt.Errorf("unknown %s %q: expected one of %s", what, got, want)
}

func marshal(ok bool, name, what string) ([]byte, error) {
	if !ok {
		return nil, fmt.Errorf("cannot marshal invalid %s %q", what, name)
	}
	return []byte(name), nil
}

func unmarshal[T any](dst *T, b []byte, parse func(string) (T, error)) error {
	v, err := parse(string(b))
	if err != nil {
		return err
	}
	*dst = v
	return nil
}
