package nodeinstall

import (
	"context"
	"fmt"
	"log/slog"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/platform"
)

// Cleanup mode: the runtime configuration out, then everything installed
// under the prefix, then the labels.

func (n *Installer) cleanup(ctx context.Context, lk *restartLock) (*Report, error) {
	cfg := n.cfg
	rep := &Report{Mode: ModeCleanup, Node: cfg.NodeName, Handlers: map[string][]string{}}
	l := install.Layout{Root: cfg.Writable, Prefix: cfg.Prefix}
	// Status resolves the prefix inside the root: a prefix leaving it is
	// refused before anything is removed.
	st, err := l.Status()
	if err != nil {
		return rep, err
	}
	plats := st.Platforms()
	// Nothing is removed while pods run on the handlers that would go.
	if err := n.guard(ctx, plats, rep); err != nil {
		return rep, err
	}
	if err := n.removeConfig(ctx, plats, rep, lk); err != nil {
		return rep, err
	}
	rm, err := removePrefix(ctx, cfg.Writable, cfg.Prefix, cfg.Log)
	if rm != nil {
		rep.Removed, rep.Kept = rm.Removed, rm.Kept
	}
	if err != nil {
		return rep, err
	}
	for _, k := range rep.Kept {
		cfg.Log.Warn("left in place", "path", k.Path, "why", k.Why)
	}
	for _, s := range plats {
		rep.Platforms = append(rep.Platforms, PlatformResult{Platform: s, Status: StatusRemoved})
	}
	// The TEE keys go before the labels: a node without installed labels
	// must advertise no keys for sandboxes it can no longer run.
	if rep.TEEKeysChanged, err = n.applyTEEKeys(ctx, nil); err != nil {
		return rep, err
	}
	rep.Labels = map[string]string{}
	if rep.LabelsChanged, err = n.applyNode(ctx, rep.Labels, nil); err != nil {
		return rep, err
	}
	cfg.Log.Info("cleaned up", "platforms", fmt.Sprint(plats), "removed", len(rep.Removed), "kept", len(rep.Kept), "restarts", rep.Restarts)
	return rep, nil
}

// removePrefix removes everything berth installed under prefix, then the
// prefix and the parents the installer made for it (its record,
// createdFile), each if empty; first what an install killed while it made
// the prefix left under a temporary name (buildPrefix). The runtime
// configuration must be gone already.
func removePrefix(ctx context.Context, w *hostfs.Writable, prefix string, log *slog.Logger) (*install.Removal, error) {
	rel, _, err := install.ResolveIn(w, prefix)
	if err != nil {
		return nil, err
	}
	if err := sweepNewPrefix(w, rel); err != nil {
		return nil, err
	}
	created, err := createdDirs(w, prefix)
	if err != nil {
		return nil, err
	}
	rm, err := (&install.Installer{Layout: install.Layout{Root: w, Prefix: prefix}, Log: log}).Uninstall(ctx)
	if err != nil {
		return rm, fmt.Errorf("removing what berth installed under %s: %w", prefix, err)
	}
	if created != nil {
		removed, err := removeCreated(w, created)
		rm.Removed = append(rm.Removed, removed...)
		if err != nil {
			return rm, err
		}
	}
	return rm, nil
}

// removeConfig removes the runtime configuration of the installed
// platforms, each with a restart and a check that every other handler is
// still live (configure.RemoveLive).
func (n *Installer) removeConfig(ctx context.Context, plats []string, rep *Report, lk *restartLock) error {
	if len(plats) == 0 {
		return nil
	}
	w := n.cfg.Writable
	st, err := configure.LoadState(w)
	if err != nil {
		return err
	}
	for _, s := range plats {
		p, err := platform.Parse(s)
		if err != nil {
			return fmt.Errorf("the installation record names platform %q: %w", s, err)
		}
		// Custom runtimes made from p run its binaries: they go first.
		for _, h := range append(st.CustomHandlersOf(p, n.cfg.Suffix), n.cfg.Suffix.Handler(p)) {
			if err := n.removeHandler(ctx, w, st, p, h, rep, lk); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeHandler removes handler h of platform p, with a restart and a
// check that every other handler is still live.
func (n *Installer) removeHandler(ctx context.Context, w configure.FS, st *configure.State, p platform.Platform, h string, rep *Report, lk *restartLock) error {
	ps, ok := st.Platforms[h]
	if !ok {
		return nil
	}
	var l platform.Layout
	if ps.Layout != nil {
		// A custom distribution's paths, as given when it was applied.
		l = *ps.Layout
	} else {
		var err error
		if l, err = n.layout(p); err != nil {
			return err
		}
	}
	rt, err := n.cfg.Runtime(ctx, l)
	if err != nil {
		return fmt.Errorf("platform %s: finding the running container runtime: %w", p, err)
	}
	res, err := configure.RemoveLive(ctx, w, h, countingRuntime{Runtime: rt, n: &rep.Restarts, lock: lk})
	if res != nil && res.Result != nil {
		rep.Changed = append(rep.Changed, res.Changed...)
	}
	if err != nil {
		return fmt.Errorf("removing the runtime configuration of %s: %w", p, err)
	}
	if res.Restarted {
		rep.Handlers[rt.Name()] = res.After
	}
	return nil
}
