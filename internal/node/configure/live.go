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
func ApplyLive(ctx context.Context, fsys FS, r *Rendered, rt Runtime) (*LiveResult, error) {
	out := &LiveResult{}
	err := locked(fsys, func(st *State) ([]op, error) {
		res, ops, err := applyOps(fsys, st, r)
		out.Result = res
		if err == nil && len(ops) > 0 {
			out.Before, _ = rt.Handlers(ctx) // a runtime that is down has nothing to lose
		}
		return ops, err
	}, func(undo func() error) error {
		out.Restarted = true
		return restartAndCheck(ctx, rt, out, func(after []string) string {
			if !slices.Contains(after, r.Handler) {
				return "the new handler " + r.Handler + " is not live"
			}
			return ""
		}, undo)
	})
	if err != nil {
		return out, err
	}
	return out, nil
}

// RemoveLive is Remove, then a restart of rt and a check that every
// handler live before, but the removed one, is still live; on failure it
// restores as ApplyLive does.
func RemoveLive(ctx context.Context, fsys FS, handler string, rt Runtime) (*LiveResult, error) {
	out := &LiveResult{}
	err := locked(fsys, func(st *State) ([]op, error) {
		res, ops, err := removeOps(fsys, st, handler)
		out.Result = res
		if err == nil && len(ops) > 0 {
			out.Before, _ = rt.Handlers(ctx)
			out.Before = slices.DeleteFunc(out.Before, func(h string) bool { return h == handler })
		}
		return ops, err
	}, func(undo func() error) error {
		out.Restarted = true
		return restartAndCheck(ctx, rt, out, func([]string) string { return "" }, undo)
	})
	if err != nil {
		return out, err
	}
	return out, nil
}

// restartAndCheck restarts rt, and rolls back through undo when the
// runtime does not come back with out.Before and what want asks.
func restartAndCheck(ctx context.Context, rt Runtime, out *LiveResult, want func([]string) string, undo func() error) error {
	var broke string
	if err := rt.Restart(ctx); err != nil {
		broke = fmt.Sprintf("restarting %s: %v", rt.Name(), err)
	} else if after, err := rt.Handlers(ctx); err != nil {
		broke = fmt.Sprintf("%s does not answer over CRI after the restart: %v", rt.Name(), err)
	} else {
		out.After = after
		if lost := missing(out.Before, after); len(lost) > 0 {
			broke = fmt.Sprintf("handlers live before are gone: %s", strings.Join(lost, ", "))
		} else {
			broke = want(after)
		}
	}
	if broke == "" {
		return nil
	}
	if log := strings.TrimSpace(rt.Log(ctx)); log != "" {
		broke += "\n" + rt.Name() + " logged:\n" + indent(log)
	}
	if err := undo(); err != nil {
		return fmt.Errorf("%w: %s\nputting the previous files back FAILED: %w: restore them from %s by hand", ErrRefused, broke, err, BackupDir)
	}
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
