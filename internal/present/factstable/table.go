// Package factstable renders Facts for people: the table `berth facts`
// prints. It lives apart from the facts package so that the data model
// carries no presentation and the host wing nothing of the present one.
package factstable

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/facts"
)

// tableWidth is the width Write wraps to.
const tableWidth = 80

// labelWidth is the width of the label column.
const labelWidth = 16

// Write writes a readable summary of f, at most 80 columns wide:
// CPU, virtualisation, kernel, devices, IOMMU and GPUs, TEE, runtimes,
// distribution and binaries, then every unknown fact with its reason.
func Write(w io.Writer, f *facts.Facts) error {
	t := &tableWriter{w: w}
	mode := "offline"
	if f.Live {
		mode = "live"
	}
	t.line(fmt.Sprintf("berth facts for %s (%s, schema v%d)", f.Root, mode, f.SchemaVersion))

	t.section("CPU")
	c := f.CPU
	id := joinNonEmpty(", ", joinNonEmpty(" ", c.Vendor, paren(c.VendorID)), famModel(c))
	t.row("vendor", id)
	t.row("model", c.ModelName)
	t.row("product line", c.ProductLine)
	if c.LogicalCPUs > 0 {
		t.row("logical CPUs", strconv.Itoa(c.LogicalCPUs))
	}
	t.row("flags", strings.Join(c.Flags, " "))
	if c.CPUID != nil {
		v := strings.Join(c.CPUID.Features, " ")
		if c.CPUID.HypervisorVendor != "" {
			v = "hypervisor " + strings.TrimSpace(c.CPUID.HypervisorVendor) + "; " + v
		}
		if c.CPUID.Recorded {
			v += " (recorded)"
		}
		t.row("CPUID", v)
	}

	t.section("Virtualisation")
	v := f.Virt
	switch {
	case v.Guest == nil:
		t.row("running as", "unknown")
	case *v.Guest:
		t.row("running as", "guest of "+v.Hypervisor)
	default:
		t.row("running as", "bare metal")
	}
	t.row("evidence", strings.Join(v.Evidence, "; "))
	t.row("DMI", joinNonEmpty(" / ", v.DMI.SysVendor, v.DMI.ProductName))
	for _, m := range []string{"kvm_intel", "kvm_amd"} {
		if p, ok := f.Kernel.Modules[m].Params["nested"]; ok {
			t.row("nested", m+".nested="+p)
		}
	}

	t.section("Kernel")
	k := f.Kernel
	t.row("release", k.Release)
	t.row("cmdline", k.Cmdline)
	var mods []string
	for _, name := range slices.Sorted(maps.Keys(k.Modules)) {
		m := k.Modules[name]
		switch {
		case m.Builtin:
			mods = append(mods, name+"(built-in)")
		default:
			mods = append(mods, name)
		}
	}
	t.row("modules", strings.Join(mods, " "))
	if k.ConfigSource != "" {
		var set []string
		for _, o := range slices.Sorted(maps.Keys(k.Config)) {
			if val := k.Config[o]; val != "n" {
				set = append(set, o+"="+val)
			}
		}
		t.row("config", k.ConfigSource+": "+strings.Join(set, " "))
	}
	if k.BootLogSource != "" {
		t.row("boot log", fmt.Sprintf("%d relevant lines from %s", len(k.BootLog), k.BootLogSource))
	}
	t.row("OS", joinNonEmpty(" ", f.OS.PrettyName, paren(joinNonEmpty(" ", f.OS.ID, f.OS.VersionID))))
	mem := ""
	if f.Memory.TotalKiB > 0 {
		mem = fmt.Sprintf("%d MiB total, %d MiB available", f.Memory.TotalKiB/1024, f.Memory.AvailableKiB/1024)
	}
	if f.Memory.NUMANodes > 0 {
		mem = joinNonEmpty(", ", mem, fmt.Sprintf("%d NUMA nodes", f.Memory.NUMANodes))
	}
	t.row("memory", mem)
	var hp []string
	for _, h := range f.Memory.HugePages {
		hp = append(hp, fmt.Sprintf("%dkB: %d/%d free", h.SizeKiB, h.Free, h.Total))
	}
	t.row("huge pages", strings.Join(hp, ", "))
	cg := ""
	if f.Cgroups.Version > 0 {
		cg = fmt.Sprintf("v%d %s", f.Cgroups.Version, strings.Join(f.Cgroups.Controllers, " "))
	}
	t.row("cgroups", cg)
	var misc []string
	for _, key := range slices.Sorted(maps.Keys(f.Cgroups.MiscCapacity)) {
		misc = append(misc, fmt.Sprintf("%s=%d", key, f.Cgroups.MiscCapacity[key]))
	}
	t.row("misc.capacity", strings.Join(misc, " "))
	if f.Limits.InotifyMaxUserInstances != nil {
		t.row("inotify", fmt.Sprintf("max_user_instances=%d", *f.Limits.InotifyMaxUserInstances))
	}

	t.section("Devices")
	var present, absent []string
	for _, p := range slices.Sorted(maps.Keys(f.Devices.Nodes)) {
		if f.Devices.Nodes[p].Exists {
			present = append(present, p)
		} else {
			absent = append(absent, p)
		}
	}
	t.row("present", strings.Join(present, " "))
	t.row("absent", strings.Join(absent, " "))
	if kv := f.Devices.KVM; kv != nil {
		s := fmt.Sprintf("opened=%t createVm=%t", kv.Opened, kv.CreateVM)
		if kv.APIVersion != 0 {
			s += fmt.Sprintf(" api=%d", kv.APIVersion)
		}
		s = joinNonEmpty(" ", s, kv.Errno, kv.Error)
		if kv.Recorded {
			s += " (recorded)"
		}
		t.row("KVM probe", s)
	}

	t.section("IOMMU/GPUs")
	iommu := fmt.Sprintf("%d groups", f.IOMMU.Groups)
	if f.IOMMU.ACPITable != "" {
		iommu = f.IOMMU.ACPITable + ", " + iommu
	}
	t.row("IOMMU", joinNonEmpty("; ", iommu, strings.Join(f.IOMMU.CmdlineFlags, " ")))
	for _, g := range f.GPUs {
		s := joinNonEmpty(" ", g.Vendor, g.Model, "["+g.DeviceID+"]", "driver="+g.Driver)
		if g.ConfidentialCapable {
			s += " cc-capable"
		}
		s = joinNonEmpty(" ", s, prefixed("cc=", g.CCMode), prefixed("ppcie=", g.PPCIeMode), prefixed("vbios=", g.VBIOS))
		t.row("GPU "+g.Address, s)
	}
	for _, sw := range f.NVSwitches {
		t.row("NVSwitch "+sw.Address, joinNonEmpty(" ", "["+sw.DeviceID+"]", sw.Generation, "driver="+sw.Driver, prefixed("ppcie=", sw.PPCIeMode)))
	}
	if len(f.GPUs) == 0 {
		t.row("GPUs", "none")
	}
	for _, sp := range f.CDISpecs {
		t.row("CDI "+sp.Path, joinNonEmpty(" ", sp.Kind, sp.Error))
	}

	t.section("TEE")
	snp := f.TEE.SNP
	t.row("SEV-SNP", joinNonEmpty(", ",
		boolKV("kvm_amd.sev_snp", snp.KVMSEVSNP),
		prefixed("firmware ", snp.FirmwareVersion),
		boolKV("RMP reserved", snp.RMPReserved),
		rangeKV("SNP ASIDs", snp.SNPASIDs)))
	tdx := f.TEE.TDX
	t.row("TDX", joinNonEmpty(", ",
		boolKV("kvm_intel.tdx", tdx.KVMTDX),
		rangeKV("KeyIDs", tdx.BIOSKeyIDs),
		boolKV("module initialized", tdx.ModuleInitialized),
		prefixed("module ", tdx.ModuleVersion), tdx.ModuleError))
	t.row("SGX", fmt.Sprintf("enclave=%t provision=%t", f.TEE.SGX.Enclave, f.TEE.SGX.Provision))

	t.section("Runtimes")
	rt := func(name string, r *facts.ContainerRuntime) {
		if r == nil {
			t.row(name, "not found")
			return
		}
		var hs []string
		for _, h := range r.Handlers {
			hs = append(hs, h.Name)
		}
		t.row(name, joinNonEmpty(", ", r.Version, r.ConfigPath, r.ConfigError, prefixed("handlers: ", strings.Join(hs, " "))))
	}
	rt("containerd", f.Runtimes.Containerd)
	rt("CRI-O", f.Runtimes.CRIO)

	t.section("Distribution")
	name := f.Distribution.Name
	if name == "" {
		name = "none recognised"
	}
	t.row("name", name)
	t.row("evidence", strings.Join(f.Distribution.Evidence, "; "))
	timeout := joinNonEmpty(" ", f.Kubelet.RuntimeRequestTimeout, paren(f.Kubelet.RuntimeRequestTimeoutSource))
	switch _, unknown := f.UnknownReason("kubelet.runtimeRequestTimeout"); {
	case unknown:
		timeout = "unknown"
	case timeout == "":
		timeout = facts.KubeletDefaultRuntimeRequestTimeout + " (default)"
	}
	t.row("kubelet", "runtimeRequestTimeout "+timeout)

	t.section("Binaries")
	for _, b := range f.Binaries {
		s := joinNonEmpty(" ", b.Path, b.Version, paren(b.Vendor))
		if b.Recorded {
			s += " (recorded)"
		}
		t.row(b.Name, s)
	}
	if len(f.Binaries) == 0 {
		t.row("found", "none")
	}

	t.section(fmt.Sprintf("Unknown facts (%d)", len(f.Unknown)))
	for _, m := range f.Unknown {
		t.wrap("  ", "    ", m.Field+": "+m.Reason)
	}
	return t.err
}

// tableWriter wraps rows to tableWidth and remembers the first error.
type tableWriter struct {
	w   io.Writer
	err error
}

func (t *tableWriter) line(s string) {
	if t.err == nil {
		_, t.err = io.WriteString(t.w, strings.TrimRight(s, " ")+"\n")
	}
}

func (t *tableWriter) section(name string) {
	t.line("")
	t.line(name)
}

// row writes "  label  value", wrapping value under itself; empty values
// are left out.
func (t *tableWriter) row(label, value string) {
	if strings.TrimSpace(value) == "" {
		return
	}
	first := "  " + label
	if len(first) < labelWidth {
		first += strings.Repeat(" ", labelWidth-len(first))
	} else {
		first += " "
	}
	t.wrap(first, strings.Repeat(" ", labelWidth), value)
}

// wrap writes text after first, continuing on lines starting with indent;
// words longer than a line are cut.
func (t *tableWriter) wrap(first, indent, text string) {
	cur := first
	empty := true
	for _, word := range strings.Fields(text) {
		for len(indent)+len(word) > tableWidth {
			if !empty {
				t.line(cur)
				cur, empty = indent, true
			}
			n := tableWidth - len(cur)
			t.line(cur + word[:n])
			word = word[n:]
			cur = indent
		}
		switch {
		case empty:
			cur += word
			empty = false
		case len(cur)+1+len(word) <= tableWidth:
			cur += " " + word
		default:
			t.line(cur)
			cur = indent + word
		}
	}
	if !empty || strings.TrimSpace(cur) != "" {
		t.line(cur)
	}
}

func famModel(c facts.CPU) string {
	var parts []string
	if c.Family != nil {
		parts = append(parts, fmt.Sprintf("family %d", *c.Family))
	}
	if c.Model != nil {
		parts = append(parts, fmt.Sprintf("model %d", *c.Model))
	}
	if c.Stepping != nil {
		parts = append(parts, fmt.Sprintf("stepping %d", *c.Stepping))
	}
	return strings.Join(parts, " ")
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

func paren(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func boolKV(k string, b *bool) string {
	if b == nil {
		return ""
	}
	return fmt.Sprintf("%s=%t", k, *b)
}

func rangeKV(k string, r *facts.Range) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("%s %d-%d", k, r.Min, r.Max)
}
