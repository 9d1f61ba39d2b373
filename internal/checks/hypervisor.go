package checks

import (
	"slices"
	"strings"

	"berth.dev/berth/internal/check"
	"berth.dev/berth/internal/facts"
	"berth.dev/berth/platform"
)

// minHypervisor is the upstream version a platform needs, or nil.
func minHypervisor(p platform.Platform) []int { return p.MinHypervisorVersion() }

func hypervisorChecks() []check.Check {
	// The evidence list of each hypervisor is built once: ReadsFor runs for
	// every platform.
	// Discovery reports the binaries of QEMU, Cloud Hypervisor and
	// Firecracker; Dragonball runs inside the Rust runtime's shim and peer
	// pods start their VM in a cloud, so they have none. StratoVirt's and
	// OpenVMM's binaries are not discovered yet: the check does not judge
	// them rather than call them missing.
	binaryReads := map[platform.Hypervisor][]string{}
	for _, h := range []platform.Hypervisor{platform.QEMU, platform.CloudHypervisor, platform.Firecracker} {
		binaryReads[h] = []string{"binaries." + h.String() + ".path"}
	}
	hasBinary := func(p platform.Platform) bool { return binaryReads[p.Hypervisor()] != nil }
	return []check.Check{{
		ID:        "hypervisor.binary",
		Title:     "for the hypervisor binary",
		Why:       "The platform's hypervisor (QEMU, Cloud Hypervisor or Firecracker) runs every sandbox; berth install brings Kata's static build when the host has none.",
		ReadsFor:  func(p platform.Platform) []string { return binaryReads[p.Hypervisor()] },
		Platforms: "all with a hypervisor binary (not dragonball, built into the Rust shim, nor remote) (warning: installed by berth install)",
		Remedies:  []string{"berth install installs Kata's static build, which includes the hypervisor", "or install the distribution package (qemu-system-x86, cloud-hypervisor)"},
		Applies:   check.When(check.Warning, hasBinary),
		Key:       keyHypervisorTEE,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			name := p.Hypervisor().String()
			b, ok := binary(f, name)
			if !ok {
				return check.Warned(name+" is not installed yet", "berth install installs Kata's static build, which includes "+name, check.Ev("binaries."+name, "absent"))
			}
			return check.Ok(b.Path+" "+b.Version, check.Ev("binaries."+name+".path", b.Path), check.Ev("binaries."+name+".version", b.Version))
		},
	}, {
		ID:        "hypervisor.version",
		Title:     "for the hypervisor's minimum version",
		Why:       "Upstream QEMU launches SEV-SNP guests from 9.1 and TDX guests from 10.1; vendor builds (AMD's snp branch, Canonical's TDX QEMU) backport it.",
		Parent:    "hypervisor.binary",
		Reads:     []string{"binaries.qemu.version", "binaries.qemu.vendor"},
		Platforms: "confidential qemu platforms",
		Remedies:  []string{"use the QEMU from berth install (Kata's static build) or upgrade the host's QEMU (SNP >= 9.1, TDX >= 10.1)"},
		Applies:   check.When(check.Blocking, func(p platform.Platform) bool { return minHypervisor(p) != nil }),
		Key:       keyHypervisorTEE,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			min := minHypervisor(p)
			b, ok := binary(f, p.Hypervisor().String())
			if !ok {
				return check.Result{Status: check.Skip, Message: "no hypervisor binary on the host yet"}
			}
			ev := []check.Evidence{check.Ev("binaries.qemu.version", b.Version), check.Ev("binaries.qemu.vendor", b.Vendor)}
			v, ok := parseVersion(b.Version)
			switch {
			case !ok:
				return check.Unsure("QEMU version not known", ev...)
			case v.atLeast(min...):
				return check.Ok("QEMU "+v.String()+" >= "+fmtVersion(min...), ev...)
			case teeVendorBuild(b.Vendor, p.TEE()):
				return check.Warned("QEMU "+v.String()+" is older than upstream "+fmtVersion(min...)+" but a vendor build ("+b.Vendor+"): it may carry the "+p.TEE().String()+" patches",
					"verify with the vendor, or use the QEMU from berth install", ev...)
			}
			return check.Failed("QEMU "+v.String()+" cannot launch "+p.TEE().String()+" guests (needs >= "+fmtVersion(min...)+")",
				"use the QEMU from berth install (Kata's static build) or upgrade QEMU", ev...)
		},
	}, {
		ID:        "hypervisor.functional",
		Title:     "if QEMU starts with KVM",
		Why:       "A QEMU that is present can still fail to start, lack KVM, or lack the confidential guest types (sev-snp-guest, tdx-guest); berth starts it once without a guest to ask.",
		Parent:    "kvm.device.exists",
		Reads:     []string{"qemuProbe"},
		Platforms: "qemu platforms",
		Remedies:  []string{"run berth check with --probe on the live host to test QEMU", "use the QEMU from berth install"},
		Applies:   check.When(check.Blocking, isQEMU),
		Key:       keyHypervisorTEE,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			q := f.QEMUProbe
			if q == nil {
				// Discovery probes only the QEMU the platform's
				// configuration runs (berth's or kata-deploy's install, or
				// --hypervisor-path); when it could not, qemuProbe is
				// unknown and the evaluator says so. Absent and known:
				// nothing is installed yet.
				return check.Result{Status: check.Skip, Message: "the platform's QEMU (/opt/berth/bin or /opt/kata/bin) is not installed yet: berth install brings it; --hypervisor-path probes another"}
			}
			ev := []check.Evidence{check.Ev("qemuProbe.binary", q.Binary), check.Ev("qemuProbe.ran", q.Ran), check.Ev("qemuProbe.kvmEnabled", q.KVMEnabled), check.Ev("qemuProbe.confidentialTypes", q.ConfidentialTypes)}
			if q.SEVError != "" {
				ev = append(ev, check.Ev("qemuProbe.sevError", q.SEVError))
			}
			switch {
			case !q.Ran:
				return check.Failed("QEMU did not start: "+orDefault(q.Error, "no error reported"), "run "+q.Binary+" -version and fix what it reports, or use the QEMU from berth install", ev...)
			case !q.KVMEnabled:
				return check.Failed("QEMU runs but cannot use KVM", "fix the kvm.* checks above; QEMU needs /dev/kvm", ev...)
			}
			want := map[platform.TEE]string{platform.SNP: "sev-snp-guest", platform.TDX: "tdx-guest"}[p.TEE()]
			if want != "" && !slices.Contains(q.ConfidentialTypes, want) {
				return check.Failed("QEMU "+q.Version+" has no "+want+" object type", "use a QEMU built with "+strings.ToUpper(p.TEE().String())+" support (berth install ships one)", ev...)
			}
			if p.TEE() == platform.SNP && q.SEVError != "" {
				return check.Failed("QEMU says: "+q.SEVError, "fix the snp.* checks above", ev...)
			}
			msg := "QEMU " + q.Version + " (" + q.Binary + ") runs with KVM"
			if want != "" {
				msg += " and has " + want
			}
			return check.Ok(msg, ev...)
		},
	}}
}

// teeVendorBuild reports whether a QEMU vendor string names a build that
// carries the TEE's patches ahead of upstream (AMD's SNP branch, Canonical's
// or Intel's TDX QEMU, Kata's static build); plain distribution packages do
// not count.
func teeVendorBuild(vendor string, tee platform.TEE) bool {
	v := strings.ToLower(vendor)
	if strings.Contains(v, "kata") {
		return true
	}
	switch tee {
	case platform.SNP:
		return strings.Contains(v, "snp") || strings.Contains(v, "amdese") || strings.Contains(v, "sev")
	case platform.TDX:
		return strings.Contains(v, "tdx")
	}
	return false
}
