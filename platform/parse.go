package platform

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a platform in any of three forms, case-insensitively:
//
//   - canonical: k3s-qemu-snp-genoa+gpu+debug+overlayfs (the suffixes in any
//     order; hypervisor abbreviations clh and fc are accepted);
//   - key=value: distribution=k3s,hypervisor=qemu,tee=snp,product=genoa,
//     snapshotter=nydus,gpu=true,debug=false;
//   - aliases: kata-deploy RuntimeClasses and handlers (kata-qemu-snp,
//     kata-qemu-snp-runtime-rs, kata-clh-debug, ...; the distribution is
//     kubeadm, or aks for the -azure shims), AKS's kata-cc, Contrast
//     platform names (Metal-QEMU-SNP, K3s-QEMU-TDX, AKS-CLH-SNP,
//     Metal-QEMU-SNP-GPU, ...) and Contrast handlers
//     (contrast-cc-metal-qemu-snp-1a2b3c4d), optionally followed by
//     +gpu/+nvidia-cpu/+debug/+rust/+snapshotter suffixes.
//
// The result is validated like New. Errors are *ValidationError.
func Parse(s string) (Platform, error) {
	spec, detail := parseSpec(s)
	if id, ok := strings.CutPrefix(detail, "rule:"); ok {
		return Platform{}, &ValidationError{Rule: rule(id), Input: strings.TrimSpace(s)}
	}
	if detail != "" {
		return Platform{}, syntaxError(s, detail)
	}
	p, id := build(spec)
	if id != "" {
		return Platform{}, newValidationError(rule(id), spec, strings.TrimSpace(s))
	}
	return p, nil
}

// maxInput bounds what Parse looks at: no platform name is longer than a
// few dozen bytes, and suggestions cost time proportional to the input.
const maxInput = 256

func syntaxError(s, detail string) error {
	in := strings.TrimSpace(s)
	if len(in) > maxInput {
		in = in[:maxInput] + "..."
	}
	var cands []string
	for _, p := range All() {
		cands = append(cands, p.String())
	}
	return &ValidationError{Rule: rule("syntax"), Input: in, Detail: detail,
		Suggestions: nearest(strings.ToLower(in), cands, maxSuggestions)}
}

// parseSpec turns text into an unvalidated Spec; a non-empty second result
// says what is wrong with the text.
func parseSpec(s string) (Spec, string) {
	in := strings.ToLower(strings.TrimSpace(s))
	switch {
	case in == "":
		return Spec{}, "empty platform name"
	case len(in) > maxInput:
		return Spec{}, fmt.Sprintf("longer than %d bytes", maxInput)
	case strings.Contains(in, "="):
		return parseKV(in)
	}
	base, mods, _ := strings.Cut(in, "+")
	var spec Spec
	var detail string
	if a, ruleID, ok := kataAlias(base); ok {
		if ruleID != "" {
			return Spec{}, "rule:" + ruleID
		}
		spec = a
	} else if spec, detail = parseBase(base); detail != "" {
		return Spec{}, detail
	}
	if mods == "" {
		return spec, ""
	}
	return applyMods(spec, strings.Split(mods, "+"))
}

// kataAlias maps a name users have from upstream to its platform: a
// kata-deploy RuntimeClass or handler (kata-<shim>, kata-<shim>-debug),
// AKS's kata-cc class and handler, or a Contrast runtime handler
// (contrast-cc-<platform>-<hash>). kata-deploy shims run on a plain
// containerd node (kubeadm), except the -azure shims, which are AKS's. A
// non-empty rule ID says the name is upstream's but not a platform berth
// models (a shim for another architecture).
func kataAlias(s string) (Spec, string, bool) {
	switch s {
	case "kata":
		return Spec{Distribution: Kubeadm, Hypervisor: QEMU, TEE: NoTEE}, "", true
	case "kata-cc-isolation", "kata-cc":
		// AKS's confidential RuntimeClass and its handler.
		return Spec{Distribution: AKS, Hypervisor: CloudHypervisor, TEE: SNP}, "", true
	case "kata-mshv-vm-isolation", "kata-vm-isolation":
		// AKS Pod Sandboxing's managed RuntimeClass (handler "kata"):
		// Cloud Hypervisor on MSHV without a TEE, kata-deploy's clh-azure.
		return Spec{Distribution: AKS, Hypervisor: CloudHypervisor, TEE: NoTEE}, "", true
	case "kata-cloud-hypervisor":
		return Spec{Distribution: Kubeadm, Hypervisor: CloudHypervisor, TEE: NoTEE}, "", true
	case "kata-firecracker":
		return Spec{Distribution: Kubeadm, Hypervisor: Firecracker, TEE: NoTEE}, "", true
	}
	if rest, ok := strings.CutPrefix(s, "contrast-cc-"); ok {
		// Contrast names its handlers contrast-cc-<platform>-<first 8 hex
		// digits of the runtime's hash>.
		if i := strings.LastIndexByte(rest, '-'); i > 0 && isHex(rest[i+1:]) && len(rest)-i-1 >= 8 {
			rest = rest[:i]
		}
		spec, detail := parseBase(rest)
		return spec, "", detail == ""
	}
	shim, ok := strings.CutPrefix(s, "kata-")
	if !ok {
		return Spec{}, "", false
	}
	var debug bool
	if d, ok := strings.CutSuffix(shim, "-debug"); ok {
		shim, debug = d, true
	}
	if _, foreign := foreignShims()[shim]; foreign {
		return Spec{}, "non-x86-shim", true
	}
	spec, ok := shimSpec(shim)
	spec.Debug = debug
	return spec, "", ok
}

// shimSpec reads a kata-deploy shim name: hypervisor[-azure][-nvidia-gpu|
// -nvidia-cpu][-snp|-tdx|-coco-dev][-runtime-rs]. The result must name the
// shim back (Platform.Shim), which rules out spellings kata-deploy does
// not ship.
func shimSpec(shim string) (Spec, bool) {
	spec := Spec{Distribution: Kubeadm, TEE: NoTEE, KataRuntime: GoRuntime}
	rest := shim
	if r, ok := strings.CutSuffix(rest, "-runtime-rs"); ok {
		rest, spec.KataRuntime = r, RustRuntime
	}
	hvTok, rest, _ := strings.Cut(rest, "-")
	found := false
	for _, r := range hypervisorTable() {
		if r.short == hvTok {
			spec.Hypervisor, found = r.h, true
			if r.runtimes[1] == 0 {
				spec.KataRuntime = r.runtimes[0]
			}
		}
	}
	if !found {
		return Spec{}, false
	}
	if r, ok := strings.CutPrefix(rest, "azure"); ok {
		spec.Distribution, rest = AKS, strings.TrimPrefix(r, "-")
	}
	if r, ok := strings.CutPrefix(rest, "nvidia-gpu"); ok {
		spec.GPU, rest = true, strings.TrimPrefix(r, "-")
	} else if r, ok := strings.CutPrefix(rest, "nvidia-cpu"); ok {
		spec.NvidiaCPU, rest = true, strings.TrimPrefix(r, "-")
	}
	switch rest {
	case "":
	case "coco-dev":
		spec.Snapshotter = Nydus
	default:
		t, err := ParseTEE(rest)
		if err != nil || t == NoTEE {
			return Spec{}, false
		}
		spec.TEE = t
	}
	if p, id := build(spec); id != "" || p.Shim() != shim {
		return Spec{}, false
	}
	return spec, true
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseBase reads dist-hypervisor-tee[-productline][-gpu]. The hypervisor
// name cloud-hypervisor contains a dash, so tokens are matched, not split.
// The trailing -gpu is Contrast's spelling (Metal-QEMU-SNP-GPU).
func parseBase(s string) (Spec, string) {
	var spec Spec
	distTok, rest, ok := strings.Cut(s, "-")
	d, err := ParseDistribution(distTok)
	if err != nil {
		return spec, err.Error()
	}
	spec.Distribution = d
	if !ok || rest == "" {
		return spec, "missing hypervisor and TEE after the distribution"
	}
	const clh = "cloud-hypervisor"
	var hvTok string
	if after, found := strings.CutPrefix(rest, clh); found && (after == "" || after[0] == '-') {
		hvTok, rest = clh, strings.TrimPrefix(after, "-")
	} else {
		hvTok, rest, _ = strings.Cut(rest, "-")
	}
	h, err := ParseHypervisor(hvTok)
	if err != nil {
		return spec, err.Error()
	}
	spec.Hypervisor = h
	if rest == "" {
		return spec, "missing TEE (none, snp or tdx) after the hypervisor"
	}
	parts := strings.Split(rest, "-")
	t, err := ParseTEE(parts[0])
	if err != nil {
		return spec, err.Error()
	}
	spec.TEE = t
	parts = parts[1:]
	if len(parts) > 0 && parts[len(parts)-1] == "gpu" {
		spec.GPU = true
		parts = parts[:len(parts)-1]
	}
	switch len(parts) {
	case 0:
	case 1:
		pl, err := ParseProductLine(parts[0])
		if err != nil || pl == AnyProductLine {
			return spec, fmt.Sprintf("unknown product line %q: expected one of %s", parts[0], names(ProductLines()))
		}
		spec.ProductLine = pl
	default:
		return spec, fmt.Sprintf("unexpected %q after the TEE", strings.Join(parts, "-"))
	}
	return spec, ""
}

// applyMods applies +gpu, +debug and +snapshotter suffixes; each at most once.
func applyMods(spec Spec, mods []string) (Spec, string) {
	seen := map[string]bool{}
	for _, m := range mods {
		if seen[m] {
			return spec, fmt.Sprintf("suffix +%s given twice", m)
		}
		seen[m] = true
		switch m {
		case "gpu":
			if spec.GPU {
				return spec, "gpu given twice"
			}
			spec.GPU = true
		case "debug":
			spec.Debug = true
		case "nvidia-cpu":
			spec.NvidiaCPU = true
		case "rust", "rs", "runtime-rs", "go":
			rt, _ := ParseKataRuntime(m)
			if spec.KataRuntime != 0 && spec.KataRuntime != rt {
				return spec, fmt.Sprintf("two Kata runtimes given (%s and %s)", spec.KataRuntime, rt)
			}
			spec.KataRuntime = rt
		default:
			sn, err := ParseSnapshotter(m)
			if err != nil {
				return spec, fmt.Sprintf("unknown suffix +%s: expected gpu, nvidia-cpu, debug, rust, go or a snapshotter (%s)", m, names(Snapshotters()))
			}
			if spec.Snapshotter != 0 {
				return spec, fmt.Sprintf("two snapshotters given (%s and %s)", spec.Snapshotter, sn)
			}
			spec.Snapshotter = sn
		}
	}
	return spec, ""
}

// parseKV reads distribution=...,hypervisor=...,tee=...[,product=...]
// [,snapshotter=...][,gpu=bool][,debug=bool].
func parseKV(s string) (Spec, string) {
	var spec Spec
	seen := map[string]bool{}
	for _, field := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(field, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok {
			return spec, fmt.Sprintf("field %q is not key=value", field)
		}
		key := canonicalKey(k)
		if key == "" {
			return spec, fmt.Sprintf("unknown key %q: expected distribution, hypervisor, tee, product, snapshotter, runtime, gpu, nvidia-cpu or debug", k)
		}
		if seen[key] {
			return spec, fmt.Sprintf("key %q given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "distribution":
			spec.Distribution, err = ParseDistribution(v)
		case "hypervisor":
			spec.Hypervisor, err = ParseHypervisor(v)
		case "tee":
			spec.TEE, err = ParseTEE(v)
		case "product":
			spec.ProductLine, err = ParseProductLine(v)
		case "snapshotter":
			if v != "" && v != "default" {
				spec.Snapshotter, err = ParseSnapshotter(v)
			}
		case "gpu":
			spec.GPU, err = parseBool(k, v)
		case "debug":
			spec.Debug, err = parseBool(k, v)
		case "runtime":
			if v != "" && v != "default" {
				spec.KataRuntime, err = ParseKataRuntime(v)
			}
		case "nvidia-cpu":
			spec.NvidiaCPU, err = parseBool(k, v)
		}
		if err != nil {
			return spec, err.Error()
		}
	}
	for _, k := range []string{"distribution", "hypervisor", "tee"} {
		if !seen[k] {
			return spec, fmt.Sprintf("missing key %q", k)
		}
	}
	return spec, ""
}

func canonicalKey(k string) string {
	switch k {
	case "distribution", "dist", "distro":
		return "distribution"
	case "hypervisor", "hv", "vmm":
		return "hypervisor"
	case "tee":
		return "tee"
	case "product", "productline", "product-line", "product_line":
		return "product"
	case "snapshotter", "snap":
		return "snapshotter"
	case "gpu":
		return "gpu"
	case "debug":
		return "debug"
	case "runtime", "kata-runtime", "shim":
		return "runtime"
	case "nvidia-cpu", "nvidiacpu":
		return "nvidia-cpu"
	}
	return ""
}

func parseBool(k, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: expected true or false", k, v)
	}
	return b, nil
}
