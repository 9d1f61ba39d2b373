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
//   - aliases: Kata runtime classes (kata-qemu-snp, kata-clh, ...; the
//     distribution is kubeadm) and Contrast platform names (Metal-QEMU-SNP,
//     K3s-QEMU-TDX, AKS-CLH-SNP, Metal-QEMU-SNP-GPU, ...), optionally
//     followed by +gpu/+debug/+snapshotter suffixes.
//
// The result is validated like New. Errors are *ValidationError.
func Parse(s string) (Platform, error) {
	spec, detail := parseSpec(s)
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
	if a, ok := kataAlias(base); ok {
		spec = a
	} else if spec, detail = parseBase(base); detail != "" {
		return Spec{}, detail
	}
	if mods == "" {
		return spec, ""
	}
	return applyMods(spec, strings.Split(mods, "+"))
}

// kataAlias maps an upstream Kata runtime class (kata-deploy shim name) to
// its platform on a plain containerd node, and AKS's kata-cc class to AKS.
func kataAlias(s string) (Spec, bool) {
	spec := Spec{Distribution: Kubeadm, Hypervisor: QEMU, TEE: NoTEE}
	switch s {
	case "kata-qemu", "kata":
	case "kata-clh", "kata-cloud-hypervisor":
		spec.Hypervisor = CloudHypervisor
	case "kata-fc", "kata-firecracker":
		spec.Hypervisor = Firecracker
	case "kata-qemu-snp":
		spec.TEE = SNP
	case "kata-qemu-tdx":
		spec.TEE = TDX
	case "kata-qemu-coco-dev":
		spec.Snapshotter = Nydus
	case "kata-qemu-nvidia-gpu":
		spec.GPU = true
	case "kata-qemu-nvidia-gpu-snp":
		spec.GPU, spec.TEE = true, SNP
	case "kata-qemu-nvidia-gpu-tdx":
		spec.GPU, spec.TEE = true, TDX
	case "kata-cc-isolation", "kata-cc":
		// AKS's confidential RuntimeClass and its handler.
		spec.Distribution, spec.Hypervisor, spec.TEE = AKS, CloudHypervisor, SNP
	default:
		return Spec{}, false
	}
	return spec, true
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
		default:
			sn, err := ParseSnapshotter(m)
			if err != nil {
				return spec, fmt.Sprintf("unknown suffix +%s: expected gpu, debug or a snapshotter (%s)", m, names(Snapshotters()))
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
			return spec, fmt.Sprintf("unknown key %q: expected distribution, hypervisor, tee, product, snapshotter, gpu or debug", k)
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
