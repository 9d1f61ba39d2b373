package platform

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agnivade/levenshtein"
)

// Rule is one constraint on platforms, with a stable ID that errors, docs
// and tests refer to, a one-line summary and the public source it rests on.
type Rule struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
	Source  string `json:"source"`
}

// ruleTable holds the rules. IDs are stable: they appear in error messages and scripts may
// match on them. Where sources disagree the stricter reading is taken and
// the comment says so.
func ruleTable() []Rule {
	return []Rule{
		// Not a compatibility rule: the input is not a platform name at all.
		{ID: "syntax",
			Summary: "a platform is written dist-hypervisor-tee[-productline][+gpu][+debug][+snapshotter], key=value,... or a Kata/Contrast alias",
			Source:  "berth platform model"},

		{ID: "spec-complete",
			Summary: "distribution, hypervisor and TEE must be set; a zero value means the field was forgotten",
			Source:  "berth platform model"},

		// AMD publishes VCEKs and SNP firmware per product line (KDS URL path
		// /vcek/v1/{Milan,Genoa,Turin}/); Intel's PCS has no such split, and
		// Kata/Contrast only distinguish product lines for SNP.
		{ID: "productline-snp-only",
			Summary: "a product line (milan, genoa, turin) can only pin an SNP platform",
			Source:  "AMD KDS VCEK API (/vcek/v1/{product}); Contrast SNP reference values per product line"},

		// Firecracker has no virtio-fs, so the rootfs must be a block device;
		// Kata's Firecracker guide sets up the devmapper snapshotter, and
		// blockfile works the same way. erofs also yields block devices but is
		// only wired up for QEMU/CLH in Kata: stricter, not allowed.
		{ID: "fc-block-snapshotter",
			Summary: "Firecracker has no shared filesystem: use the devmapper or blockfile snapshotter",
			Source:  "kata-containers docs/how-to/how-to-use-kata-containers-with-firecracker.md; FACTS.md §6"},

		// Firecracker supports neither SEV-SNP nor TDX, and kata-deploy ships
		// no kata-fc-snp / kata-fc-tdx class.
		{ID: "fc-no-tee",
			Summary: "Firecracker has no confidential-VM (SNP/TDX) support",
			Source:  "Firecracker docs (no SEV/TDX); kata-deploy runtime classes (only kata-fc)"},

		// Kata ships GPU passthrough only as kata-qemu-nvidia-gpu[-snp|-tdx].
		// Cloud Hypervisor can do VFIO upstream, but Kata ships no CLH GPU
		// class; Firecracker has no VFIO at all. Stricter reading: QEMU only.
		{ID: "gpu-qemu-only",
			Summary: "GPU passthrough is only shipped for QEMU (kata-qemu-nvidia-gpu*)",
			Source:  "kata-containers docs/use-cases/NVIDIA-GPU-passthrough-and-Kata-QEMU.md; kata-deploy runtime classes"},

		// Kata's CLH TDX/SNP paths are not shipped by kata-deploy (no
		// kata-clh-snp/-tdx), and Contrast's only CLH platform is AKS-CLH-SNP
		// on Hyper-V. Stricter reading: CLH+TEE exists only on AKS.
		{ID: "clh-tee-aks-only",
			Summary: "Cloud Hypervisor runs confidential guests only on AKS (SNP on Hyper-V); use QEMU elsewhere",
			Source:  "kata-deploy runtime classes (no kata-clh-snp/-tdx); Contrast platforms (AKS-CLH-SNP only)"},

		// AKS runs Kata pods on the Hyper-V root partition (/dev/mshv), not
		// KVM: Pod Sandboxing is kata-deploy's clh-azure shim (Cloud
		// Hypervisor built for MSHV; also clh-azure-runtime-rs) or
		// openvmm-azure-runtime-rs; Confidential Containers on AKS is
		// Microsoft's kata-cc handler (RuntimeClass kata-cc-isolation,
		// configuration-clh-snp.toml, Go runtime) with SEV-SNP, which Contrast
		// calls AKS-CLH-SNP. Nothing else runs there.
		{ID: "aks-mshv",
			Summary: "on AKS, Kata runs on Hyper-V: Cloud Hypervisor (clh-azure; with SEV-SNP the Go kata-cc handler) or OpenVMM, no TDX",
			Source:  "kata-deploy 4.1 shims clh-azure, clh-azure-runtime-rs, openvmm-azure-runtime-rs; Microsoft Learn: Confidential Containers on AKS; Contrast platform AKS-CLH-SNP"},

		// OpenVMM is shipped only as openvmm-azure-runtime-rs, for Hyper-V.
		{ID: "openvmm-aks-only",
			Summary: "OpenVMM is shipped only for Azure (openvmm-azure-runtime-rs): use it with distribution aks",
			Source:  "kata-deploy 4.1 values.yaml shims (openvmm-azure-runtime-rs only)"},

		// Which runtime ships which hypervisor: kata-deploy's shim list.
		{ID: "runtime-shipped",
			Summary: "Kata ships this hypervisor only with one runtime: dragonball and openvmm with the Rust runtime; firecracker, stratovirt and remote with the Go runtime",
			Source:  "kata-deploy 4.1 values.yaml shims (no fc-runtime-rs, stratovirt-runtime-rs or remote-runtime-rs; dragonball is runtime-rs only)"},

		// Dragonball, StratoVirt and OpenVMM have no confidential or GPU
		// configuration in Kata 4.1.
		{ID: "tee-gpu-shipped",
			Summary: "Dragonball, StratoVirt and OpenVMM have no TEE or NVIDIA configuration in Kata: use QEMU",
			Source:  "Kata 4.1 configuration templates (no dragonball/stratovirt/openvmm snp, tdx or nvidia files)"},

		// Peer pods: the VM runs in a cloud; whether it is confidential is a
		// property of the cloud instance type and pod VM image, chosen in the
		// cloud-api-adaptor, which a node preflight cannot see.
		{ID: "remote-node-neutral",
			Summary: "peer pods (remote) start their VM in a cloud: the TEE and GPU are chosen there, so use tee none without +gpu",
			Source:  "kata-deploy 4.1 shim remote; confidential-containers/cloud-api-adaptor docs"},

		// qemu-nvidia-cpu is NVIDIA's guest stack without a GPU; kata-deploy
		// ships it only without a TEE and only for QEMU.
		{ID: "nvidia-cpu-plain",
			Summary: "+nvidia-cpu (kata-qemu-nvidia-cpu) is QEMU only, without a TEE and without +gpu",
			Source:  "kata-deploy 4.1 values.yaml shims qemu-nvidia-cpu, qemu-nvidia-cpu-runtime-rs"},

		// Only x86_64 hosts are modelled.
		{ID: "non-x86-shim",
			Summary: "this kata-deploy shim is for another architecture; berth models x86_64 hosts",
			Source:  "kata-deploy 4.1 values.yaml supportedArches (qemu-se: s390x; qemu-cca: arm64)"},

		// The AKS confidential-container node sizes (DCas_cc_v5, ECas_cc_v5)
		// are AMD EPYC 7763v, i.e. Milan; no other pin can match.
		{ID: "aks-milan",
			Summary: "AKS confidential-container nodes are Milan: pin milan or nothing",
			Source:  "Azure DCas_cc_v5/ECas_cc_v5 VM sizes (3rd gen AMD EPYC 7763v)"},

		// A confidential guest must not trust a rootfs the host prepared, so
		// images are pulled and verified in the guest. Two paths do that: the
		// nydus snapshotter in guest-pull mode (kata-deploy's default for
		// qemu-snp/-tdx/-coco-dev), or overlayfs with Kata's
		// experimental_force_guest_pull, which needs no extra snapshotter
		// (and is what CRI-O's runtime_pull_image gives). Decision: both are
		// allowed, nydus is the default on containerd. Block snapshotters
		// (devmapper, blockfile) and erofs hand the guest host-built layers:
		// not allowed (erofs's CoCo tar-index mode is not released).
		// The exception is AKS's kata-cc handler, whose tardev snapshotter
		// pulls on the host but hands the guest each layer with a dm-verity
		// tree whose root the pod policy pins (rule tardev-aks-cc).
		{ID: "confidential-guest-pull",
			Summary: "SNP/TDX need guest pull: the nydus snapshotter, or overlayfs with Kata's forced guest pull (on AKS: tardev)",
			Source:  "kata-containers docs/how-to/how-to-pull-images-in-guest-with-kata.md; Kata experimental_force_guest_pull"},

		// tardev-snapshotter is Microsoft's, installed by AKS on
		// KataCcIsolation node pools for the kata-cc handler only.
		{ID: "tardev-aks-cc",
			Summary: "the tardev snapshotter exists only on confidential AKS (kata-cc, Contrast's AKS-CLH-SNP)",
			Source:  "edgelesssys/contrast node-installer/testdata/expected-aks-clh-snp.toml (kata-cc snapshotter tardev); microsoft/kata-containers src/tardev-snapshotter"},

		// Guest pull without a TEE is the coco-dev flavour; kata-deploy ships it
		// only as kata-qemu-coco-dev (no CLH, no GPU variant). Peer pods
		// (remote) pull in their cloud VM too, with nydus by default.
		{ID: "guest-pull-dev-qemu-only",
			Summary: "nydus guest pull without a TEE is kata-qemu-coco-dev (QEMU, no NVIDIA image) or peer pods (remote)",
			Source:  "kata-deploy runtime classes (kata-qemu-coco-dev; remote with snapshotter nydus)"},

		// CRI-O has no containerd snapshotters: images live in
		// containers/storage (overlay driver). The distribution's Runtime field
		// decides this, so it follows from the layout table.
		{ID: "crio-overlay-only",
			Summary: "CRI-O has no containerd snapshotters: only overlayfs (containers/storage) is possible",
			Source:  "CRI-O crio.conf(5), containers-storage.conf(5); FACTS.md §5"},
	}
}

// rule returns the rule with a known ID; an unknown ID is a bug in this
// package, caught by the tests that walk every check.
func rule(id string) Rule {
	for _, r := range ruleTable() {
		if r.ID == id {
			return r
		}
	}
	panic("platform: no rule " + id)
}

// Rules returns every rule: syntax and spec-complete, which every input
// passes through, then the compatibility rules.
func Rules() []Rule { return ruleTable() }

// RuleByID returns the rule with that ID.
func RuleByID(id string) (Rule, bool) {
	for _, r := range Rules() {
		if r.ID == id {
			return r, true
		}
	}
	return Rule{}, false
}

type check struct {
	id string
	ok func(Platform) bool
	// snap is set when ok reads the snapshotter: All tries the others once
	// for all snapshotters (TestRuleDimensions holds the flag true).
	snap bool
}

// numChecks is the number of compatibility rules; checks returns an array so
// that build, the hot path, allocates nothing.
const numChecks = 16

// checks lists the compatibility rules in the order they are evaluated;
// the first broken one is reported, so more specific rules come first.
func checks() [numChecks]check {
	return [numChecks]check{
		{"productline-snp-only", func(p Platform) bool { return p.pl == AnyProductLine || p.tee == SNP }, false},
		{"runtime-shipped", func(p Platform) bool {
			r, _ := hypervisorRowOf(p.hv)
			return r.runtimes[0] == p.rt || r.runtimes[1] == p.rt
		}, false},
		{"openvmm-aks-only", func(p Platform) bool { return p.hv != OpenVMM || p.dist == AKS }, false},
		{"aks-mshv", func(p Platform) bool {
			return p.dist != AKS || (p.hv == OpenVMM && p.tee == NoTEE) ||
				(p.hv == CloudHypervisor && (p.tee == NoTEE || (p.tee == SNP && p.rt == GoRuntime)))
		}, false},
		{"aks-milan", func(p Platform) bool { return p.dist != AKS || p.pl == AnyProductLine || p.pl == Milan }, false},
		{"fc-no-tee", func(p Platform) bool { return p.hv != Firecracker || p.tee == NoTEE }, false},
		{"remote-node-neutral", func(p Platform) bool { return p.hv != Remote || (p.tee == NoTEE && !p.gpu && !p.nvcpu) }, false},
		{"tee-gpu-shipped", func(p Platform) bool {
			return (p.hv != Dragonball && p.hv != StratoVirt && p.hv != OpenVMM) || (p.tee == NoTEE && !p.gpu && !p.nvcpu)
		}, false},
		{"gpu-qemu-only", func(p Platform) bool { return !p.gpu || p.hv == QEMU }, false},
		{"nvidia-cpu-plain", func(p Platform) bool { return !p.nvcpu || (p.hv == QEMU && p.tee == NoTEE && !p.gpu) }, false},
		{"clh-tee-aks-only", func(p Platform) bool { return p.hv != CloudHypervisor || p.tee == NoTEE || p.dist == AKS }, false},
		{"crio-overlay-only", func(p Platform) bool { return p.dist.Runtime() != CRIO || p.snap == Overlayfs }, true},
		{"fc-block-snapshotter", func(p Platform) bool { return p.hv != Firecracker || p.snap == Devmapper || p.snap == Blockfile }, true},
		{"tardev-aks-cc", func(p Platform) bool { return p.snap != Tardev || (p.dist == AKS && p.tee != NoTEE) }, true},
		{"confidential-guest-pull", func(p Platform) bool {
			return p.tee == NoTEE || p.snap == Nydus || p.snap == Overlayfs || p.snap == Tardev
		}, true},
		{"guest-pull-dev-qemu-only", func(p Platform) bool {
			return p.snap != Nydus || p.tee != NoTEE || p.hv == Remote || (p.hv == QEMU && !p.gpu && !p.nvcpu)
		}, true},
	}
}

// AppliesTo returns the compatibility rules that constrain p (those whose
// subject matches it), for explanations; all of them hold, p being valid.
func AppliesTo(p Platform) []Rule {
	p.must()
	var out []Rule
	add := func(r Rule, cond bool) {
		if cond {
			out = append(out, r)
		}
	}
	add(rule("productline-snp-only"), p.tee == SNP)
	add(rule("runtime-shipped"), len(p.hv.Runtimes()) == 1)
	add(rule("openvmm-aks-only"), p.hv == OpenVMM)
	add(rule("aks-mshv"), p.dist == AKS)
	add(rule("aks-milan"), p.dist == AKS)
	add(rule("fc-no-tee"), p.hv == Firecracker)
	add(rule("remote-node-neutral"), p.hv == Remote)
	add(rule("tee-gpu-shipped"), p.hv == Dragonball || p.hv == StratoVirt || p.hv == OpenVMM)
	add(rule("gpu-qemu-only"), p.gpu)
	add(rule("nvidia-cpu-plain"), p.nvcpu)
	add(rule("clh-tee-aks-only"), p.hv == CloudHypervisor)
	add(rule("crio-overlay-only"), p.dist.Runtime() == CRIO)
	add(rule("fc-block-snapshotter"), p.hv == Firecracker)
	add(rule("tardev-aks-cc"), p.snap == Tardev)
	add(rule("confidential-guest-pull"), p.tee != NoTEE)
	add(rule("guest-pull-dev-qemu-only"), p.snap == Nydus && p.tee == NoTEE)
	return out
}

// ValidationError says which rule an input broke and which valid platforms
// are nearest to what was asked for.
type ValidationError struct {
	Rule  Rule
	Input string
	// Suggestions are canonical names of valid platforms, nearest first.
	Suggestions []string
	// Detail is extra context for syntax errors (which token was wrong).
	Detail string
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "platform %q is invalid [%s]: %s", e.Input, e.Rule.ID, e.Rule.Summary)
	if e.Detail != "" {
		fmt.Fprintf(&b, " (%s)", e.Detail)
	}
	if len(e.Suggestions) > 0 {
		fmt.Fprintf(&b, "; did you mean %s?", strings.Join(e.Suggestions, ", "))
	}
	return b.String()
}

const maxSuggestions = 3

// newValidationError builds the error for a spec that broke rule, with
// suggestions: the valid platforms one dimension away from s, ranked by
// edit distance of the canonical form; if none exist, the nearest valid
// platforms overall.
func newValidationError(rule Rule, s Spec, input string) *ValidationError {
	return &ValidationError{Rule: rule, Input: input, Suggestions: suggest(s)}
}

func suggest(s Spec) []string {
	target := formatSpec(s)
	base := s
	if !base.Distribution.Valid() {
		base.Distribution = Kubeadm
	}
	if !base.Hypervisor.Valid() {
		base.Hypervisor = QEMU
	}
	if !base.TEE.Valid() {
		base.TEE = NoTEE
	}
	if !base.ProductLine.Valid() {
		base.ProductLine = AnyProductLine
	}
	if base.Snapshotter != 0 && !base.Snapshotter.Valid() {
		base.Snapshotter = 0
	}
	// One group per dimension: the nearest valid platform that differs from
	// the input in that dimension only (a changed hypervisor, TEE or GPU
	// flag may also take its own default snapshotter). Keeping only the best
	// of each group makes the suggestions show different ways out instead
	// of three near-identical distributions. If no single change helps, the
	// same is done for pairs of changes, and only then over All.
	varies := variations()
	var groups [][]Spec
	for _, v := range varies {
		groups = append(groups, v(base))
	}
	out := nearest(target, bestPerGroup(target, groups, nil), maxSuggestions)
	if len(out) < maxSuggestions {
		groups = groups[:0]
		for i, vi := range varies {
			for _, a := range vi(base) {
				for _, vj := range varies[i+1:] {
					groups = append(groups, vj(a))
				}
			}
		}
		more := nearest(target, bestPerGroup(target, groups, out), maxSuggestions-len(out))
		out = append(out, more...)
	}
	if len(out) == 0 {
		out = nearest(target, coarse(base), maxSuggestions)
	}
	return out
}

// coarse returns the valid platforms that keep s's debug flag and take the
// defaults for everything else but the distribution, hypervisor, TEE and
// image variant: the candidates when no one or two changes make s valid.
// It is a twentieth of All, which matters because every rejected input
// pays for it.
func coarse(s Spec) []string {
	var out []string
	for _, d := range Distributions() {
		for _, h := range Hypervisors() {
			for _, t := range TEEs() {
				for _, v := range variants() {
					if p, id := build(Spec{Distribution: d, Hypervisor: h, TEE: t, GPU: v.gpu, NvidiaCPU: v.nvcpu, Debug: s.Debug}); id == "" {
						out = append(out, p.String())
					}
				}
			}
		}
	}
	return out
}

// variations returns, per dimension, a function giving the specs that
// differ from s in that dimension.
func variations() []func(Spec) []Spec {
	return []func(Spec) []Spec{
		func(s Spec) (out []Spec) {
			for _, d := range Distributions() {
				if d != s.Distribution {
					c := s
					c.Distribution = d
					out = append(out, c)
				}
			}
			return out
		},
		func(s Spec) (out []Spec) {
			for _, h := range Hypervisors() {
				if h != s.Hypervisor {
					c := s
					c.Hypervisor = h
					out = append(out, c)
					c.Snapshotter = 0
					out = append(out, c)
				}
			}
			return out
		},
		func(s Spec) (out []Spec) {
			for _, t := range TEEs() {
				if t != s.TEE {
					c := s
					c.TEE = t
					if t != SNP {
						c.ProductLine = AnyProductLine
					}
					out = append(out, c)
					c.Snapshotter = 0
					out = append(out, c)
				}
			}
			return out
		},
		func(s Spec) (out []Spec) {
			for _, pl := range append([]ProductLine{AnyProductLine}, ProductLines()...) {
				if pl != s.ProductLine {
					c := s
					c.ProductLine = pl
					out = append(out, c)
				}
			}
			return out
		},
		// The snapshotter group prefers the default: a wrong explicit
		// snapshotter is best fixed by dropping it.
		func(s Spec) (out []Spec) {
			c := s
			c.Snapshotter = 0
			if _, id := build(c); id == "" && s.Snapshotter != 0 {
				return []Spec{c}
			}
			for _, sn := range Snapshotters() {
				if sn != s.Snapshotter {
					c := s
					c.Snapshotter = sn
					out = append(out, c)
				}
			}
			return out
		},
		func(s Spec) []Spec {
			c := s
			c.GPU = !s.GPU
			if c.GPU {
				c.NvidiaCPU = false
			}
			d := c
			d.Snapshotter = 0
			e := s
			e.NvidiaCPU = !s.NvidiaCPU
			if e.NvidiaCPU {
				e.GPU = false
			}
			return []Spec{c, d, e}
		},
		// The runtime group prefers the hypervisor's default.
		func(s Spec) []Spec {
			c := s
			c.KataRuntime = 0
			out := []Spec{c}
			for _, rt := range KataRuntimes() {
				if rt != s.KataRuntime {
					c.KataRuntime = rt
					out = append(out, c)
				}
			}
			return out
		},
	}
}

// bestPerGroup returns the canonical name of the nearest valid spec of each
// group, without duplicates, target itself or names in exclude.
func bestPerGroup(target string, groups [][]Spec, exclude []string) []string {
	var cands []string
	seen := map[string]bool{target: true}
	for _, e := range exclude {
		seen[e] = true
	}
	for _, g := range groups {
		var valid []string
		for _, c := range g {
			if p, id := build(c); id == "" {
				valid = append(valid, p.String())
			}
		}
		for _, n := range nearest(target, valid, len(valid)) {
			if !seen[n] {
				seen[n] = true
				cands = append(cands, n)
				break
			}
		}
	}
	return cands
}

// nearest returns up to n candidates by increasing edit distance to target,
// ties broken by the candidates' order.
func nearest(target string, cands []string, n int) []string {
	type scored struct {
		s string
		d int
		i int
	}
	sc := make([]scored, len(cands))
	for i, c := range cands {
		sc[i] = scored{c, levenshtein.ComputeDistance(target, c), i}
	}
	slices.SortFunc(sc, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return a.i - b.i
	})
	out := make([]string, 0, n)
	for _, x := range sc {
		if len(out) == n {
			break
		}
		out = append(out, x.s)
	}
	return out
}
