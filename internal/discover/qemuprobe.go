package discover

import (
	"context"
	"errors"
	"path"
	"strings"

	"berth.dev/berth/internal/facts"
	"berth.dev/berth/internal/hostfs"
	"berth.dev/berth/internal/probe"
)

// qemuCandidates are where QEMU lives, in order of preference: upstream
// and Debian/Ubuntu, RHEL-family, Kata's static build. The binaries
// subsystem looks at the same paths; this subsystem finds QEMU itself so
// that the two need not run in order.
var qemuCandidates = []string{
	"usr/bin/qemu-system-x86_64",
	"usr/libexec/qemu-kvm",
	"opt/kata/bin/qemu-system-x86_64",
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
		s.unknownf(field, "%s: no QEMU in the root (looked for /%s)", facts.ReasonNotRun, strings.Join(qemuCandidates, ", /"))
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
	for _, c := range qemuCandidates {
		if st, err := s.root.FS().Stat(path.Clean(c)); err == nil && st.Mode().IsRegular() {
			return c
		}
	}
	return ""
}
