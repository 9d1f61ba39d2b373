package discover

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/platform"
)

// runRuntimes fills Distribution, Kubelet, Binaries and Runtimes. They are
// one subsystem because each needs the one before: the distribution decides
// which config files and bundled binaries belong to the runtime (and where
// the kubelet's flags live), and the runtime's version comes from the
// binary scan.
func runRuntimes(ctx context.Context, s *session, f *facts.Facts) {
	f.Distribution = detectDistribution(s)
	podResources(s, &f.Distribution)
	f.Kubelet = kubeletFacts(s, f.Distribution.Name)
	f.Binaries = findBinaries(ctx, s, f.Distribution.Name)
	f.Runtimes.Containerd = containerdFacts(s, f.Distribution.Name, f.Binaries)
	f.Runtimes.CRIO = crioFacts(s, f.Distribution.Name, f.Binaries)
	kataGuests(s, f.Runtimes.Containerd)
	kataGuests(s, f.Runtimes.CRIO)
	f.CDISpecs = cdiSpecs(s)
}

// defaultLayouts name the layout used for a runtime when the detected
// distribution runs the other runtime or none was detected.
var defaultLayouts = map[platform.Runtime]string{
	platform.Containerd: "kubeadm",
	platform.CRIO:       "openshift",
}

// layoutFor returns the layout to read rt's files from.
func layoutFor(distribution string, rt platform.Runtime) (string, platform.Layout, bool) {
	layouts := platform.Layouts()
	if l, ok := layouts[distribution]; ok && l.Runtime == rt {
		return distribution, l, true
	}
	if name, ok := defaultLayouts[rt]; ok {
		if l, ok := layouts[name]; ok && l.Runtime == rt {
			return name, l, true
		}
	}
	// The table changed: take any layout of the runtime, deterministically.
	for _, name := range slices.Sorted(maps.Keys(layouts)) {
		if layouts[name].Runtime == rt {
			return name, layouts[name], true
		}
	}
	return "", platform.Layout{}, false
}

// runtimeBinary returns the first binary found of the component.
func runtimeBinary(bins []facts.Binary, name string) *facts.Binary {
	for i := range bins {
		if bins[i].Name == name {
			return &bins[i]
		}
	}
	return nil
}

// fillBinary copies the binary and its version into r, and records the
// version as unknown when the binary is missing or did not answer.
func fillBinary(s *session, r *facts.ContainerRuntime, field string, b *facts.Binary) {
	if b == nil {
		s.unknownf(field+".binary", "%s: no %s binary in the PATH directories or distribution locations", facts.ReasonMissing, strings.TrimPrefix(field, "runtimes."))
		return
	}
	r.Binary = b.Path
	r.Version = b.Version
	if b.Version == "" {
		// The binaries subsystem recorded the reason; point at it.
		s.unknownf(field+".version", "%s", versionReason(s, b))
	}
}

// versionReason finds the reason recorded for b's version.
func versionReason(s *session, b *facts.Binary) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.unknown {
		if m.Field == "binaries."+b.Name+".version" && strings.Contains(m.Reason, b.Path) {
			return m.Reason
		}
	}
	return facts.ReasonNotRun + ": " + b.Path
}

// configErrors sorts load errors into what the runtime would refuse and
// what berth could not read. A file that does not parse is a fact:
// ConfigError says where, and the handler list is incomplete (unknown). A
// file that could not be read (permission denied, a directory where the
// file should be) is not: whether the configuration parses, and its
// handlers, are unknown with the read error as the reason. It returns that
// reason, "" when every file was read.
func configErrors(s *session, r *facts.ContainerRuntime, field string, errs []error) string {
	if len(errs) == 0 {
		return ""
	}
	var parse, read []string
	for _, err := range errs {
		var pe *runtimecfg.ParseError
		if errors.As(err, &pe) {
			parse = append(parse, err.Error())
		} else {
			read = append(read, readErrorReason(err))
		}
	}
	readReason := strings.Join(read, "; ")
	if len(parse) > 0 {
		r.ConfigError = strings.Join(parse, "; ")
		s.unknownf(field+".handlers", "%s: %s", facts.ReasonUnparseable, r.ConfigError)
		return readReason
	}
	// Nothing failed to parse, but what could not be read may not.
	s.unknownf(field+".configError", "%s", readReason)
	s.unknownf(field+".handlers", "%s", readReason)
	return readReason
}

// readErrorReason is the unknown-fact reason of a config file berth could
// not read: the reason ReadReason gives for the file (permission denied,
// missing, unreadable with the errno text), or "unreadable" with the
// loader's text (an import that leaves the root, a bad glob).
func readErrorReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return ReadReason(pe.Path, pe)
	}
	return "unreadable: " + err.Error()
}

// handlerFacts converts the reader's handlers.
func handlerFacts(hs []runtimecfg.Handler) []facts.Handler {
	out := make([]facts.Handler, 0, len(hs))
	for _, h := range hs {
		out = append(out, h.Facts())
	}
	return out
}
