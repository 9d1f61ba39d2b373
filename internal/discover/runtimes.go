package discover

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"berth.dev/berth/internal/facts"
	"berth.dev/berth/internal/runtimecfg"
	"berth.dev/berth/platform"
)

// runRuntimes fills Distribution, Binaries and Runtimes. They are one
// subsystem because each needs the one before: the distribution decides
// which config files and bundled binaries belong to the runtime, and the
// runtime's version comes from the binary scan.
func runRuntimes(ctx context.Context, s *session, f *facts.Facts) {
	f.Distribution = detectDistribution(s)
	f.Binaries = findBinaries(ctx, s, f.Distribution.Name)
	f.Runtimes.Containerd = containerdFacts(s, f.Distribution.Name, f.Binaries)
	f.Runtimes.CRIO = crioFacts(s, f.Distribution.Name, f.Binaries)
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

// configErrors turns load errors into ConfigError text and, since the
// handler list may be incomplete, an unknown entry.
func configErrors(s *session, r *facts.ContainerRuntime, field string, errs []error) {
	if len(errs) == 0 {
		return
	}
	msgs := make([]string, len(errs))
	parse := false
	for i, err := range errs {
		msgs[i] = err.Error()
		var pe *runtimecfg.ParseError
		if errors.As(err, &pe) {
			parse = true
		}
	}
	r.ConfigError = strings.Join(msgs, "; ")
	reason := facts.ReasonUnparseable
	if !parse {
		reason = "unreadable"
	}
	s.unknownf(field+".handlers", "%s: %s", reason, r.ConfigError)
}

// handlerFacts converts the reader's handlers.
func handlerFacts(hs []runtimecfg.Handler) []facts.Handler {
	out := make([]facts.Handler, 0, len(hs))
	for _, h := range hs {
		fh := facts.Handler{
			Name:                         h.Name,
			RuntimeType:                  h.RuntimeType,
			RuntimePath:                  h.RuntimePath,
			RuntimeRoot:                  h.RuntimeRoot,
			ConfigPath:                   h.ConfigPath,
			Snapshotter:                  h.Snapshotter,
			PodAnnotations:               h.PodAnnotations,
			PrivilegedWithoutHostDevices: h.PrivilegedWithoutHostDevices,
			Source:                       h.Source,
		}
		for k, v := range h.Options {
			if k == "ConfigPath" {
				continue
			}
			if fh.Options == nil {
				fh.Options = map[string]string{}
			}
			fh.Options[k] = fmt.Sprint(v)
		}
		out = append(out, fh)
	}
	return out
}
