package configure

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/hostfs"
)

// missingDirs lists dir and those of its parents that do not exist yet,
// deepest first: the directories a write below dir creates.
func missingDirs(fsys FS, dir string) []string {
	var out []string
	for d := dir; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		if _, err := fsys.Lstat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		out = append(out, d)
	}
	return out
}

// locked runs fn on the host's state under the root's lock, commits the changes
// fn returns together with the new state, and removes the directories
// berth created that nothing is left in (the state, lock and backup
// directories too once berth owns nothing on the host).
//
// Before fn, it completes what a killed run left (its journal,
// IntentPath) and sweeps berth's temporary files; the change is journaled
// before its first rename and the journal cleared once it is complete.
//
// live, when not nil, runs after the commit with the lock still held (a
// restart and its verification); undo puts back every file and the state
// as they were before the commit. It runs with a nil undo when fn changed
// nothing: a restart may still be owed (t.pending) or the handler not
// live.
func locked(fsys FS, t *tx, fn func(st *State) ([]op, error), live func(undo func() error) error) error {
	unlock, err := fsys.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	t.fsys = fsys
	if err := t.recover(); err != nil {
		return err
	}
	stateDirs := missingDirs(fsys, path.Dir(StatePath))
	var st *State
	defer func() {
		if _, err := fsys.Lstat(StatePath); !errors.Is(err, fs.ErrNotExist) {
			return
		}
		// Nothing is berth's on this host (any more, or after a failed
		// first apply): every directory berth made that is empty now goes.
		dirs := stateDirs
		if st != nil {
			dirs = append(dirs, st.Dirs...)
		}
		removeEmptyDirs(fsys, dirs)
		// A journal cleared by this run (a restart owed and now done)
		// leaves the state directory empty.
		t.forgetStateDir()
	}()
	st, err = loadState(fsys)
	if err != nil {
		return err
	}
	sweepTemps(fsys, stateDirsOf(st))
	ops, err := fn(st)
	if err != nil {
		return err
	}
	// This change supersedes what an earlier one owed for its handler:
	// its own restart proves the handler, and a change the other way
	// (a remove after an apply) makes the earlier restart moot.
	t.pending = slices.DeleteFunc(t.pending, func(p Pending) bool {
		return p.Handler == t.handler && !p.Reload && (t.rt != nil || p.Gone != (t.op == "remove"))
	})
	if len(ops) == 0 {
		if live != nil {
			if err := live(nil); err != nil {
				return err
			}
			t.pending = nil
		}
		return t.owe()
	}
	empty := len(st.Platforms) == 0 && len(st.Backups) == 0
	st.addDirs(stateDirs)
	var created []string
	for _, o := range ops {
		if !o.remove {
			created = append(created, missingDirs(fsys, path.Dir(o.path))...)
		}
	}
	st.addDirs(created)
	if empty {
		ops = append(ops, op{path: StatePath, remove: true})
	} else {
		ops = append(ops, op{path: StatePath, data: st.marshal(), mode: 0o600})
	}
	undo, err := undoOps(fsys, ops)
	if err != nil {
		return err
	}
	t.in = newIntent(t, ops, undo, append(slices.Clone(stateDirs), created...))
	if err := writeIntent(fsys, t.in); err != nil {
		return err
	}
	t.at("intent")
	if err := commit(fsys, ops, t.at); err != nil {
		// Nothing was changed (or it was rolled back): the journal keeps
		// only what was owed before.
		if cerr := t.owe(); cerr != nil {
			return errors.Join(err, cerr)
		}
		removeEmptyDirs(fsys, created)
		return err
	}
	t.at("committed")
	if live != nil {
		var undoErr error
		err := live(func() error {
			t.in.Undo = true
			if undoErr = writeIntent(fsys, t.in); undoErr != nil {
				return undoErr
			}
			t.at("undo")
			undoErr = commit(fsys, undo, nil)
			return undoErr
		})
		if err != nil {
			if undoErr == nil {
				// Rolled back (or never restarted): the journal keeps what
				// was owed before, and a restart when the runtime ran the
				// change's files.
				if t.reloadOwed {
					t.pending = append(t.pending, Pending{Handler: t.handler, Platform: t.platform, Suffix: t.suffix, Reload: true})
				}
				if cerr := t.owe(); cerr != nil {
					return errors.Join(err, cerr)
				}
			}
			removeEmptyDirs(fsys, created)
			return err
		}
		t.pending = nil
	}
	if empty {
		// Berth owns nothing any more: its directories go before the
		// journal does (all but the journal's own, which the deferred
		// cleanup, or the next run, removes).
		removeEmptyDirs(fsys, append(slices.Clone(stateDirs), st.Dirs...))
	}
	if err := t.owe(); err != nil {
		return err
	}
	t.at("cleared")
	if empty {
		return nil
	}
	if gone := removeEmptyDirs(fsys, st.Dirs); len(gone) > 0 {
		st.Dirs = slices.DeleteFunc(st.Dirs, func(d string) bool { return slices.Contains(gone, d) })
		return hostfs.WriteAtomic(fsys, StatePath, st.marshal(), 0o600)
	}
	return nil
}

// removeEmptyDirs removes those of dirs that are empty, deepest first (a
// directory is removed only once what is inside it is), and returns them.
func removeEmptyDirs(fsys FS, dirs []string) []string {
	sorted := slices.Clone(dirs)
	slices.SortFunc(sorted, func(a, b string) int {
		if c := strings.Count(b, "/") - strings.Count(a, "/"); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var gone []string
	for _, d := range slices.Compact(sorted) {
		// Remove refuses a directory that is not empty: it stays.
		if err := fsys.Remove(d); err == nil || errors.Is(err, fs.ErrNotExist) {
			gone = append(gone, d)
		}
	}
	return gone
}

// undoOps are the ops that put back what ops change: each file's content
// and mode, or its absence.
func undoOps(fsys FS, ops []op) ([]op, error) {
	var undo []op
	for _, o := range ops {
		data, mode, exists, err := readCurrent(fsys, o.path)
		if err != nil {
			return nil, err
		}
		if exists {
			undo = append(undo, op{path: o.path, data: data, mode: mode})
		} else if !o.remove {
			undo = append(undo, op{path: o.path, remove: true})
		}
	}
	return undo, nil
}
