// Package catalog is berth's catalogue of preflight checks, one file per
// area. Every check is a small pure function over facts.Facts: it never
// reads a file. See package check for the framework.
package catalog

import (
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// All returns the static catalogue in tree order (every parent before its
// children). It builds a fresh slice on every call: there is no shared
// mutable catalogue.
func All() []check.Check { return withExtra(0) }

// withExtra is All with room for extra more checks: the areas are built
// first and the catalogue allocated once, not grown area by area (a run
// builds it on one core while the other waits).
func withExtra(extra int) []check.Check {
	areas := [...][]check.Check{
		virtChecks(), kvmChecks(), deviceChecks(), cmdlineChecks(),
		cgroupChecks(), memoryChecks(), limitChecks(),
		iommuChecks(), gpuChecksWithVGPU(), snpChecks(), tdxChecks(),
		hypervisorChecks(), sharedFSChecks(),
		runtimeChecks(), snapshotterChecks(), distributionChecks(),
		sriovChecks(), storageChecks(), networkChecks(), remoteChecks(),
	}
	n := extra
	for _, a := range areas {
		n += len(a)
	}
	all := make([]check.Check, 0, n)
	for _, a := range areas {
		all = append(all, a...)
	}
	return all
}

// Which platforms a check applies to is the check's own Applies. Two
// restrictions recur across areas and are spelled once here:
//
//   - onNode: the check judges the machine that runs the sandbox VM (its
//     CPU, KVM, firmware, devices, hypervisor, memory for guests). Peer
//     pods (the remote hypervisor) run that VM in a cloud, so such checks
//     do not apply to them; the container runtime, snapshotter, cgroups
//     and distribution checks still do.
//   - onKVMHost: the check judges a KVM host (the KVM device and modules,
//     and the host side of SEV-SNP and TDX: kernel, BIOS, firmware,
//     kvm_amd/kvm_intel). On AKS Kata runs on the Hyper-V root partition
//     (/dev/mshv) and the TEE's host side is Azure's, so they do not apply
//     there (mshv.device does); the CPU generation still does.

// onNode restricts applies to platforms whose sandbox VM runs on the node.
func onNode(applies func(platform.Platform) (check.Severity, bool)) func(platform.Platform) (check.Severity, bool) {
	return func(p platform.Platform) (check.Severity, bool) {
		if !p.Local() {
			return 0, false
		}
		return applies(p)
	}
}

// onKVMHost restricts applies to platforms whose sandbox VM runs on the
// node's KVM (not on AKS's /dev/mshv, not in a cloud).
func onKVMHost(applies func(platform.Platform) (check.Severity, bool)) func(platform.Platform) (check.Severity, bool) {
	return onNode(func(p platform.Platform) (check.Severity, bool) {
		if p.HypervisorDevice() != "dev/kvm" {
			return 0, false
		}
		return applies(p)
	})
}

// nodeArea restricts every check of an area that judges only the machine
// running the sandbox VM (devices, IOMMU, GPUs, ...) with onNode.
func nodeArea(cs []check.Check) []check.Check {
	for i := range cs {
		cs[i].Applies = onNode(cs[i].Applies)
	}
	return cs
}

// kvmHostArea restricts every check of an area that judges only a KVM
// host with onKVMHost.
func kvmHostArea(cs []check.Check) []check.Check {
	for i := range cs {
		cs[i].Applies = onKVMHost(cs[i].Applies)
	}
	return cs
}

// For returns the catalogue for one host: All plus one check per host
// plug-in error and plug-in finding.
func For(f *facts.Facts) []check.Check {
	plugins := pluginChecks(f)
	return append(withExtra(len(plugins)), plugins...)
}

// WithPlugins is For with the catalogue a caller already has (All(),
// unchanged): the command that checks --ignore against the catalogue
// before discovery does not build it twice.
func WithPlugins(all []check.Check, f *facts.Facts) []check.Check {
	return slices.Concat(all, pluginChecks(f))
}

// Platform predicates used by Applies.

func anyPlatform(platform.Platform) bool      { return true }
func isConfidential(p platform.Platform) bool { return p.Confidential() }
func isSNP(p platform.Platform) bool          { return p.TEE() == platform.SNP }
func isTDX(p platform.Platform) bool          { return p.TEE() == platform.TDX }
func isGPU(p platform.Platform) bool          { return p.GPU() }
func isConfidentialGPU(p platform.Platform) bool {
	return p.GPU() && p.Confidential()
}
func hasVirtioFS(p platform.Platform) bool { return p.SharedFS() == "virtio-fs" }
func usesVhost(p platform.Platform) bool   { return p.Hypervisor().UsesVhost() }
func hasProbe(p platform.Platform) bool    { return p.Hypervisor().HasProbe() }

// Keys for check.Check.Key: the dimensions a RunFor result depends on.
const (
	keyHypervisorTEE = check.ByHypervisor | check.ByTEE
	keyDistribution  = check.ByDistribution
	keyMemory        = check.ByHypervisor | check.ByTEE | check.ByGPU | check.BySnapshotter | check.ByKataRuntime
	keySnapshotter   = check.ByHypervisor | check.BySnapshotter
	keyProductLine   = check.ByProductLine
)

// yes is a *bool that is set and true.
func yes(b *bool) bool { return b != nil && *b }

// no is a *bool that is set and false.
func no(b *bool) bool { return b != nil && !*b }

// node returns a device node fact by its root-relative path.
func node(f *facts.Facts, path string) (facts.DeviceNode, bool) {
	n, ok := f.Devices.Nodes[path]
	return n, ok && n.Exists
}

// module returns a kernel module fact.
func module(f *facts.Facts, name string) facts.Module {
	return f.Kernel.Modules[name]
}

// configSet reports whether a kernel config option is y or m.
func configSet(f *facts.Facts, opt string) bool {
	v := f.Kernel.Config[opt]
	return v == "y" || v == "m"
}

// binary returns the first binary fact with the logical name.
func binary(f *facts.Facts, name string) (facts.Binary, bool) {
	for _, b := range f.Binaries {
		if b.Name == name {
			return b, true
		}
	}
	return facts.Binary{}, false
}

// version is a dotted numeric version; parseVersion reads the leading
// numbers of strings such as "9.2.0", "v2.0.4", "6.8.0-45-generic",
// "1.55", "QEMU emulator version 8.2.2 (Debian 1:8.2.2+ds-0ubuntu1)".
type version []int

func parseVersion(s string) (version, bool) {
	s = strings.TrimSpace(s)
	// Find the first digit.
	i := strings.IndexAny(s, "0123456789")
	if i < 0 {
		return nil, false
	}
	s = s[i:]
	var v version
	for len(v) < 3 {
		j := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == 0 {
			break
		}
		n, err := strconv.Atoi(s[:j])
		if err != nil {
			return nil, false
		}
		v = append(v, n)
		if j == len(s) || s[j] != '.' {
			break
		}
		s = s[j+1:]
	}
	return v, len(v) > 0
}

// atLeast reports whether v >= min, comparing missing parts as 0.
func (v version) atLeast(min ...int) bool {
	for i, m := range min {
		x := 0
		if i < len(v) {
			x = v[i]
		}
		if x != m {
			return x > m
		}
	}
	return true
}

func (v version) String() string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ".")
}

func fmtVersion(min ...int) string { return version(min).String() }

// unknownOf returns the first of fields that discovery could not read (the
// field, or a section it belongs to, is in Facts.Unknown), as evidence.
// A check that reads a fact only on some hosts (a fallback, a second
// opinion) uses it rather than declaring the fact in Reads, which would
// make it unknown on every host where that fact is unknown.
func unknownOf(f *facts.Facts, fields ...string) (check.Evidence, bool) {
	for _, field := range fields {
		if r, ok := f.UnknownReason(field); ok {
			return check.Evidence{Field: field, Value: "unknown (" + r + ")"}, true
		}
	}
	return check.Evidence{}, false
}
