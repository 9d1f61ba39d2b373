package catalog

import (
	"slices"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// minHypervisor is the upstream version a platform needs, or nil.
func minHypervisor(p platform.Platform) []int { return p.MinHypervisorVersion() }

func hypervisorChecks() []check.Check {
	// The evidence list of each hypervisor is built once: ReadsFor runs for
	// every platform. Discovery reports a hypervisor's binary under the
	// hypervisor's name; Dragonball runs inside the Rust runtime's shim and
	// peer pods start their VM in a cloud, so they have none
	// (Platform.HypervisorBinary is "").
	binaryReads := map[platform.Hypervisor][]string{}
	hasBinary := func(p platform.Platform) bool { return p.HypervisorBinary() != "" }
	for _, p := range platform.Hypervisors() {
		binaryReads[p] = []string{"binaries." + p.String() + ".path"}
	}
	return []check.Check{{
		ID:    "hypervisor.binary",
		Title: "for the hypervisor binary",
		Why:   "The platform's hypervisor (QEMU, Cloud Hypervisor, Firecracker, StratoVirt or OpenVMM) runs every sandbox; berth install brings Kata's static build when the host has none.",
		ReadsFor: func(p platform.Platform) []string {
			if !hasBinary(p) {
				return nil
			}
			return binaryReads[p.Hypervisor()]
		},
		Platforms: "all with a hypervisor binary (not dragonball, built into the Rust shim, nor remote) (warning: installed by berth install)",
		Remedies:  []string{"berth install installs Kata's static build, which includes the hypervisor", "or install the distribution package (qemu-system-x86, cloud-hypervisor)"},
		Applies:   onNode(check.When(check.Warning, hasBinary)),
		Key:       keyHypervisorTEE,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			name := p.Hypervisor().String()
			b, ok := hypervisorBinary(f, p)
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
		Applies:   onNode(check.When(check.Blocking, func(p platform.Platform) bool { return minHypervisor(p) != nil })),
		Key:       keyHypervisorTEE,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			min := minHypervisor(p)
			b, ok := hypervisorBinary(f, p)
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
			case p.TEE().VendorBuild(b.Vendor):
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
		Applies:   onKVMHost(check.When(check.Blocking, hasProbe)),
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
			want := p.TEE().QEMUGuestObject()
			if want != "" && !slices.Contains(q.ConfidentialTypes, want) {
				return check.Failed("QEMU "+q.Version+" has no "+want+" object type", "use a QEMU built with "+strings.ToUpper(p.TEE().String())+" support (berth install ships one)", ev...)
			}
			if p.TEE().SEV() && q.SEVError != "" {
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

// hypervisorBinary is the platform's hypervisor binary as discovery found
// it, preferring the one under an install prefix (berth's, then
// kata-deploy's): that is the binary the rendered configuration runs. A
// host's own build (a distribution's QEMU in /usr/bin) answers only when
// no prefix has one.
func hypervisorBinary(f *facts.Facts, p platform.Platform) (facts.Binary, bool) {
	name := p.Hypervisor().String()
	for _, prefix := range prefixPaths() {
		want := "/" + prefix + "/bin/" + p.HypervisorBinary()
		for _, b := range f.Binaries {
			if b.Name == name && b.Path == want {
				return b, true
			}
		}
	}
	return binary(f, name)
}
