package configure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Runtime is the running container runtime of a host, as apply and remove
// with --restart drive it.
type Runtime interface {
	// Name says which runtime (a systemd unit), for messages.
	Name() string
	// Restart restarts the runtime and returns once it was started.
	Restart(ctx context.Context) error
	// Handlers waits until the runtime answers on its CRI socket and
	// returns the runtime handlers it has loaded.
	Handlers(ctx context.Context) ([]string, error)
	// Log is the runtime's recent log (its journal), for saying why it
	// broke; empty when there is none to read.
	Log(ctx context.Context) string
}

// Services is the optional part of a Runtime that runs the services berth
// ships with a platform (nydus-snapshotter): a live apply enables and
// starts them before the runtime restarts, so that the runtime finds them
// when it loads its proxy plugins, and a live remove stops and disables
// them before their unit files go. Both of runtimectl's mechanisms
// (systemctl, systemd's D-Bus API) have it.
type Services interface {
	// StartServices reloads the unit files, enables each of units and
	// starts it (restarts it when restart and it runs already), and
	// returns once each is active; an error names the unit.
	StartServices(ctx context.Context, units []string, restart bool) error
	// StopServices stops and disables each of units and reloads the unit
	// files.
	StopServices(ctx context.Context, units []string) error
	// ServiceActive reports whether unit runs now.
	ServiceActive(ctx context.Context, unit string) bool
	// ServiceLog is unit's recent log, for saying why it did not start.
	ServiceLog(ctx context.Context, unit string) string
	// ProveSnapshotter returns nil when the runtime has the snapshotter
	// name loaded and it answers; nil too when it cannot be asked (the
	// handler check still runs).
	ProveSnapshotter(ctx context.Context, name string) error
}

// proxySnapshotter is the proxy plugin r's files define ("" for none):
// the snapshotter a live apply proves.
func (r *Rendered) proxySnapshotter() string {
	for _, f := range r.Host {
		if f.Proxy != nil {
			return f.Proxy.Name
		}
	}
	return ""
}

// services are the systemd units among r's files, and whether ops change
// one of the files of a service (its unit or its config), so that a
// running one must restart to read them.
func (r *Rendered) services(ops []op) (units []string, changed bool) {
	var paths []string
	for _, f := range r.Host {
		if f.Kind == Owned {
			paths = append(paths, f.Path)
		}
		if f.Format != "systemd" && f.Format != "nydus" {
			continue
		}
		for _, o := range ops {
			if o.path == f.Path {
				changed = true
			}
		}
	}
	return ServiceUnits(paths), changed
}

// startServices starts units before the runtime restarts; broke says why
// they did not start, with what they logged ("" when they did).
func startServices(ctx context.Context, sv Services, units []string, restart bool) (broke string) {
	if err := sv.StartServices(ctx, units, restart); err != nil {
		broke = err.Error()
		for _, u := range units {
			if log := strings.TrimSpace(tail(sv.ServiceLog(ctx, u), 15)); log != "" {
				broke += "\n" + u + " logged:\n" + indent(log)
			}
		}
	}
	return broke
}

// stopNewServices stops and disables those of units that did not run
// before a failed apply, while their unit files are still there to
// disable (systemd cannot disable a unit whose file is gone).
func stopNewServices(ctx context.Context, sv Services, units []string, active map[string]bool) error {
	var stop []string
	for _, u := range units {
		if !active[u] {
			stop = append(stop, u)
		}
	}
	if len(stop) == 0 {
		return nil
	}
	return sv.StopServices(ctx, stop)
}

// restartOldServices restarts those of units that ran before a failed
// apply, once their previous files are back.
func restartOldServices(ctx context.Context, sv Services, units []string, active map[string]bool) error {
	var again []string
	for _, u := range units {
		if active[u] {
			again = append(again, u)
		}
	}
	if len(again) == 0 {
		return nil
	}
	return sv.StartServices(ctx, again, true)
}

// tail keeps the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LiveResult is what a live apply or remove found: the handlers the
// runtime had before and has after.
type LiveResult struct {
	*Result
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
	// Restarted is false when nothing changed, so nothing was restarted.
	Restarted bool `json:"restarted"`
}

// ApplyLive is Apply, then a restart of rt and a check over CRI that r's
// handler and every handler that was live before are live. If not, it
// puts every file and the state back, restarts rt again, checks the old
// handlers are back, and returns an ErrRefused error naming what broke
// and what the runtime logged. The host's configuration lock is held
// throughout, so no other berth run sees the intermediate state.
//
// With nothing to change it still proves the handler (and the restarts a
// killed run owes) and restarts rt when they are not live. Before any
// restart the runtime loads its configuration (ConfigLoader): one that
// would not load is refused, before anything changed when it is not
// berth's change that breaks it.
func ApplyLive(ctx context.Context, fsys FS, r *Rendered, rt Runtime, opts ...Option) (*LiveResult, error) {
	out := &LiveResult{}
	var units []string
	var restartUnits bool
	active := map[string]bool{}
	sv, _ := rt.(Services)
	t := newTx("apply", r.Handler, r.Platform.String(), string(r.Suffix), rt, opts)
	proxy := r.proxySnapshotter()
	proxyBroken := func() string {
		if proxy == "" || sv == nil {
			return ""
		}
		err := sv.ProveSnapshotter(ctx, proxy)
		if err == nil {
			return ""
		}
		why := "the snapshotter " + proxy + " is not live: " + err.Error()
		for _, u := range units {
			if log := strings.TrimSpace(tail(sv.ServiceLog(ctx, u), 15)); log != "" {
				why += "\n" + u + " logged:\n" + indent(log)
			}
		}
		return why
	}
	err := locked(fsys, t, func(st *State) ([]op, error) {
		res, ops, err := applyOps(fsys, st, r)
		out.Result = res
		if err != nil {
			return ops, err
		}
		units, restartUnits = r.services(ops)
		if len(units) > 0 && sv == nil {
			return nil, refused("%s needs %s running, and %s cannot start services: apply without --restart and start them by hand", r.Handler, strings.Join(units, ", "), rt.Name())
		}
		for _, u := range units {
			active[u] = sv.ServiceActive(ctx, u)
		}
		out.Before, _ = rt.Handlers(ctx) // a runtime that is down has nothing to lose
		if len(ops) > 0 {
			if err := t.loadCheck(ctx, false); err != nil {
				return nil, err
			}
		}
		return ops, nil
	}, func(undo func() error) error {
		if undo == nil {
			// Nothing to change: done when the handler is live (a killed
			// run may have left the files without the restart).
			if slices.Contains(out.Before, r.Handler) && t.pendingBroken(out.Before) == "" && !t.reload() && proxyBroken() == "" {
				return nil
			}
			if err := t.loadCheck(ctx, false); err != nil {
				return err
			}
		} else if err := t.loadCheck(ctx, true); err != nil {
			if uerr := undo(); uerr != nil {
				return fmt.Errorf("%w\nputting the previous files back FAILED: %w: restore them from %s by hand", err, uerr, BackupDir)
			}
			return fmt.Errorf("%w\nberth put the previous files back; %s was not restarted", err, rt.Name())
		}
		if len(units) > 0 {
			if broke := startServices(ctx, sv, units, restartUnits); broke != "" {
				// The runtime was not restarted: the services and the
				// files go back, and it still runs what it ran.
				svcErr := stopNewServices(ctx, sv, units, active)
				if undo == nil {
					return fmt.Errorf("%w: %s\n%s was not restarted", ErrRefused, broke, rt.Name())
				}
				if err := undo(); err != nil {
					return fmt.Errorf("%w: %s\nputting the previous files back FAILED: %w: restore them from %s by hand", ErrRefused, broke, err, BackupDir)
				}
				if err := errors.Join(svcErr, restartOldServices(ctx, sv, units, active)); err != nil {
					return fmt.Errorf("%w: %s\nberth put the previous files back, but stopping or restarting %s failed: %w", ErrRefused, broke, strings.Join(units, ", "), err)
				}
				return fmt.Errorf("%w: %s\nberth put the previous files back; %s was not restarted", ErrRefused, broke, rt.Name())
			}
		}
		out.Restarted = true
		return t.restartAndCheck(ctx, rt, out, func(after []string) string {
			if !slices.Contains(after, r.Handler) {
				return "the new handler " + r.Handler + " is not live"
			}
			if why := t.pendingBroken(after); why != "" {
				return why
			}
			return proxyBroken()
		}, undo, func() error {
			if len(units) == 0 {
				return nil
			}
			return stopNewServices(ctx, sv, units, active)
		}, func() error {
			if len(units) == 0 {
				return nil
			}
			return restartOldServices(ctx, sv, units, active)
		})
	})
	if out.Result != nil {
		out.Warnings = append(t.warnings, out.Warnings...)
	}
	if err != nil {
		return out, err
	}
	return out, nil
}

// RemoveLive is Remove, then a restart of rt and a check that every
// handler live before, but the removed one, is still live; on failure it
// restores as ApplyLive does. With nothing to remove it still proves the
// handler gone (and the restarts a killed run owes), restarting rt when
// it is not.
func RemoveLive(ctx context.Context, fsys FS, handler string, rt Runtime, opts ...Option) (*LiveResult, error) {
	out := &LiveResult{}
	var units []string
	sv, _ := rt.(Services)
	t := newTx("remove", handler, "", "", rt, opts)
	err := locked(fsys, t, func(st *State) ([]op, error) {
		t.named(st)
		res, ops, err := removeOps(fsys, st, handler)
		out.Result = res
		if err != nil {
			return ops, err
		}
		var gone []string
		for _, o := range ops {
			if o.remove {
				gone = append(gone, o.path)
			}
		}
		out.Before, _ = rt.Handlers(ctx)
		out.Before = slices.DeleteFunc(out.Before, func(h string) bool { return h == handler })
		if len(ops) == 0 {
			return nil, nil
		}
		if err := t.loadCheck(ctx, false); err != nil {
			return nil, err
		}
		// Stopped and disabled while their unit files are there to
		// disable: systemd cannot disable a unit whose file is gone.
		if units = ServiceUnits(gone); len(units) > 0 {
			if sv == nil {
				return nil, refused("removing %s removes %s, and %s cannot stop services: remove without --restart and stop them by hand", handler, strings.Join(units, ", "), rt.Name())
			}
			if err := sv.StopServices(ctx, units); err != nil {
				_ = sv.StartServices(ctx, units, false)
				return nil, fmt.Errorf("%w: stopping %s: %w (nothing was changed)", ErrRefused, strings.Join(units, ", "), err)
			}
		}
		return ops, nil
	}, func(undo func() error) error {
		var live []string
		if undo == nil {
			// Nothing to remove: done when the handler is gone from the
			// runtime too (a killed run may have left the files without
			// the restart).
			live, _ = rt.Handlers(ctx)
			if !slices.Contains(live, handler) && t.pendingBroken(live) == "" && !t.reload() {
				return nil
			}
			if err := t.loadCheck(ctx, false); err != nil {
				return err
			}
		} else if err := t.loadCheck(ctx, true); err != nil {
			if uerr := undo(); uerr != nil {
				return fmt.Errorf("%w\nputting the previous files back FAILED: %w: restore them from %s by hand", err, uerr, BackupDir)
			}
			if len(units) > 0 {
				_ = sv.StartServices(ctx, units, false)
			}
			return fmt.Errorf("%w\nberth put the previous files back; %s was not restarted", err, rt.Name())
		}
		out.Restarted = true
		return t.restartAndCheck(ctx, rt, out, func(after []string) string {
			if slices.Contains(after, handler) {
				return "the removed handler " + handler + " is still live"
			}
			return t.pendingBroken(after)
		}, undo, func() error { return nil }, func() error {
			if len(units) == 0 {
				return nil
			}
			return sv.StartServices(ctx, units, false)
		})
	})
	if out.Result != nil {
		out.Warnings = append(t.warnings, out.Warnings...)
	}
	if err != nil {
		return out, err
	}
	return out, nil
}

// restartAndCheck restarts rt, and rolls back through undo when the
// runtime does not come back with out.Before and what want asks. A nil
// undo is a restart with nothing changed by this run: there is nothing
// to put back, and the failure is reported as it is.
//
// beforeUndo and afterUndo put the services a change started or stopped
// back as they were: those it started are stopped while their unit files
// are there, those it stopped restarted once their files are back.
func (t *tx) restartAndCheck(ctx context.Context, rt Runtime, out *LiveResult, want func([]string) string, undo, beforeUndo, afterUndo func() error) error {
	var broke string
	t.restarting()
	if err := rt.Restart(ctx); err != nil {
		broke = fmt.Sprintf("restarting %s: %v", rt.Name(), err)
	} else {
		t.at("restarted")
		after, err := rt.Handlers(ctx)
		switch lost := missing(out.Before, after); {
		case err != nil:
			broke = fmt.Sprintf("%s does not answer over CRI after the restart: %v", rt.Name(), err)
		case len(lost) > 0:
			out.After = after
			broke = fmt.Sprintf("handlers live before are gone: %s", strings.Join(lost, ", "))
		default:
			out.After = after
			broke = want(after)
		}
	}
	if broke == "" {
		t.at("proven")
		return nil
	}
	if log := strings.TrimSpace(rt.Log(ctx)); log != "" {
		broke += "\n" + rt.Name() + " logged:\n" + indent(log)
	}
	if undo == nil {
		return fmt.Errorf("%w: %s\nthis run changed no file; %s runs on the files already in place", ErrRefused, broke, rt.Name())
	}
	svcErr := beforeUndo()
	if err := undo(); err != nil {
		return fmt.Errorf("%w: %s\nputting the previous files back FAILED: %w: restore them from %s by hand", ErrRefused, broke, err, BackupDir)
	}
	if err := errors.Join(svcErr, afterUndo()); err != nil {
		broke += "\nputting the services back failed: " + err.Error()
	}
	t.reloadOwed = true
	if err := rt.Restart(ctx); err != nil {
		return fmt.Errorf("%w: %s\nberth put the previous files back, but restarting %s again failed: %w", ErrRefused, broke, rt.Name(), err)
	}
	again, err := rt.Handlers(ctx)
	if err != nil {
		return fmt.Errorf("%w: %s\nberth put the previous files back and restarted %s, which still does not answer over CRI: %w", ErrRefused, broke, rt.Name(), err)
	}
	if lost := missing(out.Before, again); len(lost) > 0 {
		return fmt.Errorf("%w: %s\nberth put the previous files back and restarted %s, but %s are still not live", ErrRefused, broke, rt.Name(), strings.Join(lost, ", "))
	}
	t.reloadOwed = false
	out.After = again
	return fmt.Errorf("%w: %s\nberth put the previous files back and restarted %s: its handlers are live again (%s)", ErrRefused, broke, rt.Name(), strings.Join(again, ", "))
}

// missing lists the entries of want that have is without.
func missing(want, have []string) []string {
	var out []string
	for _, h := range want {
		if !slices.Contains(have, h) {
			out = append(out, h)
		}
	}
	return out
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

// IsRefused reports whether err is a refusal (exit 1) rather than a usage
// or internal error.
func IsRefused(err error) bool { return errors.Is(err, ErrRefused) }

// ProblemLines keeps the last n lines of a runtime's log that report an
// error or a warning: containerd and CRI-O write logrus lines
// (level=error, level=warning) to stderr, which the journal stores at
// priority info, so the level is in the text, not the priority. A CRI
// plugin that failed to load is a warning there.
func ProblemLines(log string, n int) string {
	var keep []string
	for line := range strings.Lines(log) {
		for _, lv := range []string{"level=fatal", "level=error", "level=warning"} {
			if strings.Contains(line, lv) {
				keep = append(keep, strings.TrimRight(line, "\n"))
				break
			}
		}
	}
	if len(keep) > n {
		keep = keep[len(keep)-n:]
	}
	return strings.Join(keep, "\n")
}
