// Package nodereport builds the compact NodeReport content (api/v1alpha1)
// and the node labels the agent publishes from discovered facts and
// verdicts, and computes the content hash that lets the agent skip writes
// when nothing changed.
package nodereport

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// Label keys the agent writes besides the per-platform labels.
const (
	// PlatformLabelPrefix + platform.Name() is "true" when the node can run
	// the platform (ready or ready with warnings), else "false".
	PlatformLabelPrefix = v1alpha1.LabelPrefix + "platform."
	// TEELabel is snp, tdx or none: the TEE the host has enabled.
	TEELabel = v1alpha1.LabelPrefix + "tee"
	// KVMLabel is "true" when /dev/kvm can create a VM.
	KVMLabel = v1alpha1.LabelPrefix + "kvm"
	// GPUCCLabel is the confidential-computing mode of the node's
	// CC-capable GPUs (GPUCCMode); absent on nodes without one.
	GPUCCLabel = v1alpha1.LabelPrefix + "gpu.cc-mode"
	// maxLabelName is the limit of the name part of a label key.
	maxLabelName = 63
)

// Build returns the report content for node from the facts and verdicts of
// one evaluation, with its ContentHash set. observed becomes ObservedAt.
func Build(node, version string, f *facts.Facts, vs []check.Verdict, observed time.Time) v1alpha1.Report {
	r := v1alpha1.Report{
		NodeName:     node,
		BerthVersion: clip(version, v1alpha1.MaxNameLen),
		ObservedAt:   metav1.NewTime(observed.UTC().Truncate(time.Second)),
		Facts:        Summarize(f),
	}
	type agg struct {
		status  check.Status
		order   int
		message string
		remedy  string
	}
	worst := map[string]*agg{}
	n := 0
	for _, v := range vs {
		pv := v1alpha1.PlatformVerdict{Name: v.Name}
		switch v.Status {
		case check.Ready:
			pv.Verdict = v1alpha1.VerdictReady
			r.Summary.Ready++
		case check.ReadyWithWarnings:
			pv.Verdict = v1alpha1.VerdictWarn
			r.Summary.Warn++
		default:
			pv.Verdict = v1alpha1.VerdictNotReady
			pv.FirstBlocker = clip(v.BlockedBy, v1alpha1.MaxNameLen)
			r.Summary.NotReady++
		}
		if len(r.Platforms) < v1alpha1.MaxPlatforms {
			r.Platforms = append(r.Platforms, pv)
		}
		for _, fd := range v.Findings {
			if fd.Status != check.Fail && fd.Status != check.Warn {
				continue
			}
			a, ok := worst[fd.ID]
			if !ok {
				a = &agg{status: fd.Status, order: n, message: fd.Message, remedy: fd.Remedy}
				worst[fd.ID] = a
				n++
			}
			if fd.Status == check.Fail && a.status != check.Fail {
				a.status, a.message, a.remedy = fd.Status, fd.Message, fd.Remedy
			}
		}
	}
	ids := make([]string, 0, len(worst))
	for id := range worst {
		ids = append(ids, id)
	}
	// Failures before warnings, then in the order the checks first
	// appeared (the catalogue's tree order).
	slices.SortFunc(ids, func(x, y string) int {
		a, b := worst[x], worst[y]
		if a.status != b.status {
			if a.status == check.Fail {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.order, b.order)
	})
	for i, id := range ids {
		if i >= v1alpha1.MaxFindings {
			r.FindingsOmitted = int32(len(ids) - v1alpha1.MaxFindings)
			break
		}
		a := worst[id]
		st := v1alpha1.FindingWarn
		if a.status == check.Fail {
			st = v1alpha1.FindingFail
		}
		msg := clip(a.message, v1alpha1.MaxTextLen)
		if msg == "" {
			msg = a.status.String()
		}
		r.Findings = append(r.Findings, v1alpha1.Finding{ID: clip(id, v1alpha1.MaxNameLen), Status: st, Message: msg, Remedy: clip(a.remedy, v1alpha1.MaxTextLen)})
	}
	r.ContentHash = Hash(r)
	return r
}

// Hash is "sha256:<hex>" of the canonical JSON of r without ContentHash
// and ObservedAt: two reports with equal content have equal hashes however
// often they were observed. The agent also hashes the report it reads back,
// so a hand edit that kept the old hash is noticed all the same.
func Hash(r v1alpha1.Report) string {
	r.ContentHash = ""
	r.ObservedAt = metav1.Time{}
	b, err := json.Marshal(r)
	if err != nil {
		// Plain strings, numbers and bools: marshalling cannot fail.
		panic(fmt.Sprintf("nodereport: hashing: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Summarize picks the facts an operator compares across nodes.
func Summarize(f *facts.Facts) v1alpha1.FactsSummary {
	s := v1alpha1.FactsSummary{
		CPU: v1alpha1.CPUSummary{
			Vendor:      clip(f.CPU.VendorID, v1alpha1.MaxNameLen),
			Model:       clip(f.CPU.ModelName, v1alpha1.MaxNameLen),
			ProductLine: clip(f.CPU.ProductLine, v1alpha1.MaxNameLen),
		},
		Virt:          v1alpha1.VirtSummary{Guest: f.Virt.Guest != nil && *f.Virt.Guest, Hypervisor: clip(f.Virt.Hypervisor, v1alpha1.MaxNameLen)},
		KernelRelease: clip(f.Kernel.Release, v1alpha1.MaxNameLen),
		OS:            clip(osName(f.OS), v1alpha1.MaxNameLen),
		Distribution:  clip(f.Distribution.Name, v1alpha1.MaxNameLen),
		KVMUsable:     f.Devices.KVM != nil && f.Devices.KVM.Opened && f.Devices.KVM.CreateVM,
		IOMMUGroups:   int32(f.IOMMU.Groups),
		Unknown:       int32(len(f.Unknown)),
	}
	if c := f.Runtimes.Containerd; c != nil {
		s.Runtimes.Containerd = clip(c.Version, v1alpha1.MaxNameLen)
	}
	if c := f.Runtimes.CRIO; c != nil {
		s.Runtimes.CRIO = clip(c.Version, v1alpha1.MaxNameLen)
	}
	for _, b := range f.Binaries {
		v := clip(b.Version, v1alpha1.MaxNameLen)
		switch b.Name {
		case "qemu":
			s.Hypervisors.QEMU = cmp.Or(s.Hypervisors.QEMU, v)
		case "cloud-hypervisor":
			s.Hypervisors.CloudHypervisor = cmp.Or(s.Hypervisors.CloudHypervisor, v)
		case "firecracker":
			s.Hypervisors.Firecracker = cmp.Or(s.Hypervisors.Firecracker, v)
		}
	}
	snp := f.TEE.SNP
	if snp.KVMSEVSNP != nil || snp.FirmwareVersion != "" || snp.SNPASIDs != nil || f.CPU.HasFlag("sev_snp") {
		s.TEE.SNP = &v1alpha1.SNPSummary{
			Enabled:         snp.KVMSEVSNP != nil && *snp.KVMSEVSNP,
			FirmwareVersion: clip(snp.FirmwareVersion, v1alpha1.MaxNameLen),
		}
		if r := snp.SNPASIDs; r != nil && r.Max >= r.Min {
			s.TEE.SNP.SNPASIDs = int32(r.Max - r.Min + 1)
		}
	}
	tdx := f.TEE.TDX
	if tdx.KVMTDX != nil || tdx.ModuleInitialized != nil || tdx.ModuleVersion != "" || f.CPU.HasFlag("tdx_host_platform") {
		s.TEE.TDX = &v1alpha1.TDXSummary{
			ModuleInitialized: tdx.ModuleInitialized != nil && *tdx.ModuleInitialized,
			ModuleVersion:     clip(tdx.ModuleVersion, v1alpha1.MaxNameLen),
		}
	}
	for _, g := range f.GPUs {
		if len(s.GPUs) >= v1alpha1.MaxGPUs {
			break
		}
		model := g.Model
		if model == "" {
			model = g.Vendor + ":" + g.DeviceID
		}
		s.GPUs = append(s.GPUs, v1alpha1.GPUSummary{
			Model: clip(model, v1alpha1.MaxNameLen), VFIO: g.VFIOBound,
			Isolated: g.GroupIsolated != nil && *g.GroupIsolated, ConfidentialCapable: g.ConfidentialCapable,
			CCMode: gpuCCMode(g),
		})
	}
	mod := func(name string) bool { m, ok := f.Kernel.Modules[name]; return ok && m.Present() }
	s.Modules = v1alpha1.ModuleSummary{
		KVM:        mod("kvm") && (mod("kvm_amd") || mod("kvm_intel")),
		VhostVsock: mod("vhost_vsock"),
		VhostNet:   mod("vhost_net"),
		VFIOPCI:    mod("vfio_pci"),
	}
	return s
}

func osName(o facts.OS) string {
	if o.PrettyName != "" {
		return o.PrettyName
	}
	return strings.TrimSpace(o.ID + " " + o.VersionID)
}

// TEE is the TEE the report says is enabled: snp, tdx or none.
func TEE(r *v1alpha1.Report) string {
	switch t := r.Facts.TEE; {
	case t.SNP != nil && t.SNP.Enabled:
		return "snp"
	case t.TDX != nil && t.TDX.ModuleInitialized:
		return "tdx"
	}
	return "none"
}

// Labels are the node labels for r: one per platform whose name fits a
// label key (the rest are left out, never truncated, since a cut name could
// select the wrong platform), plus the TEE and KVM labels.
func Labels(r *v1alpha1.Report) map[string]string {
	l := map[string]string{
		TEELabel: TEE(r),
		KVMLabel: fmt.Sprint(r.Facts.KVMUsable),
	}
	if m := GPUCCMode(r); m != "" {
		l[GPUCCLabel] = m
	}
	for _, p := range r.Platforms {
		if !LabelFits(p.Name) {
			continue
		}
		l[PlatformLabelPrefix+p.Name] = fmt.Sprint(p.Verdict == v1alpha1.VerdictReady || p.Verdict == v1alpha1.VerdictWarn)
	}
	return l
}

// gpuCCMode is a GPU's mode for the report: PPCIe counts as its own mode
// (the CC bits read off in PPCIe mode).
func gpuCCMode(g facts.GPU) string {
	if g.PPCIeMode == "on" {
		return "ppcie"
	}
	return g.CCMode
}

// GPUCCMode is one value for the CC modes of the report's CC-capable GPUs,
// as the node label carries it: their mode when all share it (on, ppcie,
// devtools, off), "mixed" when they differ, "unknown" when any is not
// known, "" without such a GPU. It says what the GPU operator's
// nvidia.com/cc.mode.state says, read by berth from the GPUs themselves.
func GPUCCMode(r *v1alpha1.Report) string {
	mode := ""
	for _, g := range r.Facts.GPUs {
		if !g.ConfidentialCapable {
			continue
		}
		switch {
		case g.CCMode == "":
			return "unknown"
		case mode == "":
			mode = g.CCMode
		case mode != g.CCMode:
			mode = "mixed"
		}
	}
	return mode
}

// KataDeployLabels are the labels kata-deploy's NodeFeatureRule would put
// on the node for its enabled TEE (amd.feature.node.kubernetes.io/snp,
// intel.feature.node.kubernetes.io/tdx: what kata-deploy's RuntimeClasses
// select on), for clusters that run those classes without NFD. Empty
// without a TEE.
func KataDeployLabels(r *v1alpha1.Report) map[string]string {
	if t, err := platform.ParseTEE(TEE(r)); err == nil && t.NFDLabel() != "" {
		return map[string]string{t.NFDLabel(): "true"}
	}
	return map[string]string{}
}

// IsKataDeployLabel reports whether k is a label KataDeployLabels may set.
func IsKataDeployLabel(k string) bool {
	return k == platform.SNP.NFDLabel() || k == platform.TDX.NFDLabel()
}

// LabelFits reports whether PlatformLabelPrefix+name is a valid label key.
func LabelFits(name string) bool {
	return len("platform."+name) <= maxLabelName
}

// clip cuts s to at most n bytes on a rune boundary, ending with "…" when
// it had to cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut := n - len(ell)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ell
}
