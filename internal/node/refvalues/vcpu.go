package refvalues

import (
	"fmt"
	"sort"
	"strings"

	"berth.dev/berth/platform"
)

// VCPUType is a QEMU CPU model as given to -cpu, with the CPUID signature
// (CPUID Fn0000_0001_EAX) that QEMU puts into RDX of the initial VMSA.
type VCPUType struct {
	Name      string
	Signature uint32
}

// cpuSignature encodes family, model and stepping the way CPUID
// Fn0000_0001_EAX reports them (AMD CPUID specification #25481): families
// above 0xF are split into a base 0xF plus an extended family.
func cpuSignature(family, model, stepping uint32) uint32 {
	baseFamily, extFamily := family, uint32(0)
	if family > 0xf {
		baseFamily, extFamily = 0xf, family-0xf
	}
	return extFamily&0xff<<20 | (model>>4)&0xf<<16 | baseFamily&0xf<<8 | model&0xf<<4 | stepping&0xf
}

// vcpuModels lists QEMU's SNP-capable EPYC models (builtin_x86_defs in
// target/i386/cpu.c); versioned aliases share the signature of the base
// model.
func vcpuModels() map[string]uint32 {
	milan := cpuSignature(25, 1, 1)
	genoa := cpuSignature(25, 17, 0)
	turin := cpuSignature(26, 0, 0)
	return map[string]uint32{
		"EPYC-Milan": milan, "EPYC-Milan-v1": milan, "EPYC-Milan-v2": milan, "EPYC-Milan-v3": milan,
		"EPYC-Genoa": genoa, "EPYC-Genoa-v1": genoa, "EPYC-Genoa-v2": genoa,
		"EPYC-Turin": turin, "EPYC-Turin-v1": turin,
	}
}

// ParseVCPUType resolves a QEMU CPU model name (case-insensitive), or a raw
// signature written as hex ("0xa00f11") for models berth does not know.
func ParseVCPUType(s string) (VCPUType, error) {
	s = strings.TrimSpace(s)
	models := vcpuModels()
	for name, sig := range models {
		if strings.EqualFold(name, s) {
			return VCPUType{Name: name, Signature: sig}, nil
		}
	}
	if v, ok := parseHex(s); ok && v != 0 && v <= 0xffffffff {
		return VCPUType{Name: fmt.Sprintf("%#x", v), Signature: uint32(v)}, nil
	}
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	sort.Strings(names)
	return VCPUType{}, fmt.Errorf("unknown vCPU type %q: expected one of %s, or a CPUID signature in hex (0x...)", s, strings.Join(names, ", "))
}

// ProductLine is an AMD EPYC generation with SEV-SNP, spelled as AMD
// spells it in reference-value documents ("Milan"). It decides the vCPU
// signature and the layout of the TCB version. The product lines
// themselves are platform's (platform.ProductLine): this is their name in
// the document.
type ProductLine string

// The SNP product lines, for callers that name one.
const (
	Milan ProductLine = "Milan"
	Genoa ProductLine = "Genoa"
	Turin ProductLine = "Turin"
)

// ProductLineOf returns the document name of a platform product line, ""
// for platform.AnyProductLine (one set of values per product line).
func ProductLineOf(p platform.ProductLine) ProductLine { return ProductLine(p.Display()) }

// ProductLines lists every SNP product line in release order.
func ProductLines() []ProductLine {
	var out []ProductLine
	for _, p := range platform.ProductLines() {
		out = append(out, ProductLineOf(p))
	}
	return out
}

// platformLine is the platform product line of p (AnyProductLine when p
// names none).
func (p ProductLine) platformLine() platform.ProductLine {
	pl, _ := platform.ParseProductLine(string(p))
	return pl
}

// VCPUType is the QEMU CPU model a guest on this product line is started
// with by default.
func (p ProductLine) VCPUType() VCPUType {
	name := "EPYC-" + string(p)
	return VCPUType{Name: name, Signature: vcpuModels()[name]}
}

// TCBField is one component of an SNP TCB_VERSION.
type TCBField struct {
	Name string `json:"name"`
	// Byte is the byte index in the little-endian 64-bit TCB_VERSION.
	Byte int `json:"byte"`
}

// TCBLayout returns the components of the TCB_VERSION for the product line.
// Turin (family 1Ah) added the FMC component and moved the others (SEV-SNP
// firmware ABI, TCB_VERSION structure): reading a Turin report with the
// Milan layout silently yields wrong numbers.
func (p ProductLine) TCBLayout() []TCBField {
	if p.platformLine().TCBHasFMC() {
		return []TCBField{{"fmc", 0}, {"bootloader", 1}, {"tee", 2}, {"snp", 3}, {"microcode", 7}}
	}
	return []TCBField{{"bootloader", 0}, {"tee", 1}, {"snp", 6}, {"microcode", 7}}
}

// parseHex parses "0x..." or bare hex digits.
func parseHex(s string) (uint64, bool) {
	t := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if t == "" || len(t) > 16 {
		return 0, false
	}
	var v uint64
	for _, c := range strings.ToLower(t) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
