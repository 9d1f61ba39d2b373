package discover

import (
	"context"
	"errors"
	"path"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/probe"
)

// qemuCandidates are the QEMUs a platform's Kata configuration runs, in
// order of preference: berth's install prefix, then kata-deploy's. A
// distribution's QEMU (/usr/bin/qemu-system-x86_64, /usr/libexec/qemu-kvm)
// is probed only when the user names it (Options.QEMUPath, berth check
// --hypervisor-path), because no configuration berth writes runs it
// unless told to: probing it would prove a binary that never runs.
func qemuCandidates(opt Options) []string {
	if opt.QEMUPath != "" {
		return []string{strings.TrimPrefix(path.Clean("/"+opt.QEMUPath), "/")}
	}
	return []string{"opt/berth/bin/qemu-system-x86_64", "opt/kata/bin/qemu-system-x86_64"}
}

// runQEMUProbe fills f.QEMUProbe. On the live "/" root (and with
// Options.Probe) it starts the host's QEMU with no guest and asks it over
// QMP what it supports; on an offline root it uses the recorded probe of a
// snapshot. It never runs anything from an offline root.
func runQEMUProbe(ctx context.Context, s *session, f *facts.Facts) {
	const field = "qemuProbe"
	if !s.root.Live() {
		var p facts.QEMUProbe
		switch err := s.root.Probe("qemu", &p); {
		case err == nil:
			p.Recorded = true
			f.QEMUProbe = &p
		case errors.Is(err, hostfs.ErrOffline):
			s.unknownf(field, "%s", facts.ReasonOffline)
		default:
			s.unknownf(field, "%s: %v", facts.ReasonUnparseable, err)
		}
		return
	}
	if !s.opt.Probe {
		s.unknownf(field, "%s: disabled (--no-probe)", facts.ReasonNotRun)
		return
	}
	// Starting a long-running process inside a mounted root needs a chroot
	// with a working /dev and /proc, which the QMP session cannot get
	// through Root.Run; until it can, the probe runs on "/" only.
	if s.root.Path() != "/" {
		s.unknownf(field, "%s: qemu probe: only on the live / root", facts.ReasonNotRun)
		return
	}
	bin := s.findQEMU()
	if bin == "" {
		if s.opt.QEMUPath != "" {
			s.unknownf(field, "%s: --hypervisor-path /%s is not a file in the root", facts.ReasonNotRun, qemuCandidates(s.opt)[0])
		}
		// Nothing installed yet: no probe and nothing unknown; the
		// hypervisor checks say the platform's QEMU comes with berth
		// install.
		return
	}
	// A failed probe is a fact (p.Error says why), not an unknown.
	p, _ := probe.QEMU(ctx, "/"+bin, s.opt.ProbeTimeout)
	f.QEMUProbe = p
	hostfs.RecordProbe(s.root, "qemu", p)
}

// findQEMU returns the first QEMU candidate that exists in the root as a
// file (following symlinks), relative to the root.
func (s *session) findQEMU() string {
	for _, c := range qemuCandidates(s.opt) {
		if st, err := s.root.FS().Stat(path.Clean(c)); err == nil && st.Mode().IsRegular() {
			return c
		}
	}
	return ""
}
