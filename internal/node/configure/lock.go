package configure

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strings"
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
// live, when not nil, runs after the commit with the lock still held (a
// restart and its verification); undo puts back every file and the state
// as they were before the commit.
func locked(fsys FS, fn func(st *State) ([]op, error), live func(undo func() error) error) error {
	unlock, err := fsys.Lock()
	if err != nil {
		return err
	}
	defer unlock()
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
	}()
	st, err = loadState(fsys)
	if err != nil {
		return err
	}
	ops, err := fn(st)
	if err != nil {
		return err
	}
	empty := len(st.Platforms) == 0 && len(st.Backups) == 0
	if len(ops) > 0 {
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
		if err := commit(fsys, ops); err != nil {
			return err
		}
		if live != nil {
			if err := live(func() error { return commit(fsys, undo) }); err != nil {
				removeEmptyDirs(fsys, created)
				return err
			}
		}
	}
	if empty || len(ops) == 0 {
		return nil
	}
	if gone := removeEmptyDirs(fsys, st.Dirs); len(gone) > 0 {
		st.Dirs = slices.DeleteFunc(st.Dirs, func(d string) bool { return slices.Contains(gone, d) })
		return commit(fsys, []op{{path: StatePath, data: st.marshal(), mode: 0o600}})
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
