package configure

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"berth.dev/berth/internal/runtimecfg"
)

// Result says what apply or remove did.
type Result struct {
	Handler string `json:"handler"`
	// Changed are the files written or removed, relative to the root.
	Changed []string `json:"changed"`
	// Warnings are things the user should know but that did not stop it.
	Warnings []string `json:"warnings,omitempty"`
}

// op is one change to commit: data written to Path, or Path removed.
type op struct {
	path   string
	data   []byte
	mode   fs.FileMode
	remove bool
	// orig is what was there, for rollback when a later rename fails.
	orig    []byte
	existed bool
}

// readCurrent reads name; exists is false when it is absent.
func readCurrent(fsys FS, name string) (data []byte, mode fs.FileMode, exists bool, err error) {
	fi, err := fsys.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0o644, false, nil
	}
	if err != nil {
		return nil, 0, false, fmt.Errorf("reading %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, false, fmt.Errorf("%s: not a regular file (%s)", name, fi.Mode().Type())
	}
	data, err = fsys.ReadFile(name)
	if err != nil {
		return nil, 0, false, fmt.Errorf("reading %s: %w", name, err)
	}
	return data, fi.Mode().Perm(), true, nil
}

// validate refuses content that the runtime could not read, naming file,
// line and column.
func validate(f File, name string, data []byte) error {
	if f.Format != "toml" {
		return nil
	}
	if strings.Contains(name, "crio") {
		_, err := runtimecfg.ParseCRIO(name, data)
		return err
	}
	_, err := runtimecfg.ParseContainerd(name, data)
	return err
}

// handlerVersion is the config version a handler block's keys are for.
func handlerVersion(content []byte) int {
	switch {
	case bytes.Contains(content, []byte(runtimecfg.PluginCRIRuntime)):
		return 3
	case bytes.Contains(content, []byte(runtimecfg.PluginCRIv2)):
		return 2
	}
	return 0
}

// Apply writes r's host files under fsys: all or nothing (every file is
// staged and synced before the first rename), backing up any file it
// modifies the first time, and recording what it owns in the state file.
// When everything is already in place it writes nothing at all.
func Apply(fsys FS, r *Rendered) (*Result, error) {
	st, err := loadState(fsys)
	if err != nil {
		return nil, err
	}
	res := &Result{Handler: r.Handler}
	var ops []op
	var owned []OwnedFile
	for _, f := range r.Host {
		name, err := resolve(fsys, f.Path)
		if err != nil {
			return nil, err
		}
		cur, mode, exists, err := readCurrent(fsys, name)
		if err != nil {
			return nil, err
		}
		switch f.Kind {
		case Owned:
			owned = append(owned, OwnedFile{Path: name, Kind: Owned})
			if exists && bytes.Equal(cur, f.Content) {
				continue
			}
			if exists && !st.owns(name) {
				return nil, fmt.Errorf("%s exists and was not written by berth: move it away, then apply again", name)
			}
			ops = append(ops, op{path: name, data: f.Content, mode: 0o644, orig: cur, existed: exists})
		case Block:
			if skipImports(f, name, cur, exists) {
				continue
			}
			owned = append(owned, OwnedFile{Path: name, Kind: Block, Block: f.BlockID})
			base := cur
			if !exists {
				if f.Base == nil {
					return nil, fmt.Errorf("%s does not exist: berth extends the %s but does not create it", name, f.Purpose)
				}
				base = f.Base
			} else if err := validate(f, name, cur); err != nil {
				return nil, fmt.Errorf("refusing to change %s, which does not parse: %w", name, err)
			}
			if v := handlerVersion(f.Content); v != 0 && exists && f.Format == "toml" {
				if c, err := runtimecfg.ParseContainerd(name, cur); err == nil && c.Version != v {
					return nil, fmt.Errorf("%s is a version %d config but the handler is written for version %d: pass --containerd-config-version %d or migrate the file (containerd config migrate)",
						name, c.Version, v, c.Version)
				}
			}
			next, err := MergeBlock(name, base, f.BlockID, f.Content, f.Where)
			if err != nil {
				return nil, err
			}
			if err := validate(f, name, next); err != nil {
				return nil, fmt.Errorf("adding berth's block to %s would break it: %w", name, err)
			}
			if exists && bytes.Equal(next, cur) {
				continue
			}
			if _, ok := st.Backups[name]; !ok {
				b := Backup{Existed: exists, Mode: uint32(mode)}
				if exists {
					b.Path = path.Join(BackupDir, name)
					ops = append(ops, op{path: b.Path, data: cur, mode: mode})
				} else {
					b.Created = string(f.Base)
				}
				st.Backups[name] = b
			}
			ops = append(ops, op{path: name, data: next, mode: mode, orig: cur, existed: exists})
		}
	}
	prev, had := st.Platforms[r.Handler]
	ps := PlatformState{Platform: r.Platform.String(), Files: owned}
	if had && !slices.Equal(prev.Files, ps.Files) {
		return nil, fmt.Errorf("handler %s was applied with other files (%v): run berth config remove --platform %s first", r.Handler, prev.Files, prev.Platform)
	}
	if len(ops) == 0 && had && prev.Platform == ps.Platform {
		return res, nil
	}
	st.Platforms[r.Handler] = ps
	ops = append(ops, op{path: StatePath, data: st.marshal(), mode: 0o600})
	if err := commit(fsys, ops); err != nil {
		return nil, err
	}
	for _, o := range ops {
		if o.path != StatePath && !strings.HasPrefix(o.path, BackupDir+"/") {
			res.Changed = append(res.Changed, o.path)
		}
	}
	return res, nil
}

// Remove removes what berth wrote for handler: its own files, its blocks,
// and, once the last block of a file is gone, restores the file's backup
// byte for byte (or deletes a file berth created).
func Remove(fsys FS, handler string) (*Result, error) {
	st, err := loadState(fsys)
	if err != nil {
		return nil, err
	}
	res := &Result{Handler: handler}
	ps, ok := st.Platforms[handler]
	if !ok {
		return res, nil
	}
	var ops []op
	pending := map[string][]byte{} // files changed earlier in this remove
	for _, f := range slices.Backward(ps.Files) {
		cur, mode, exists, err := readCurrent(fsys, f.Path)
		if p, ok := pending[f.Path]; ok {
			cur, exists, err = p, true, nil
		}
		if err != nil {
			return nil, err
		}
		if !exists {
			res.Warnings = append(res.Warnings, f.Path+" was already gone")
			continue
		}
		switch f.Kind {
		case Owned:
			ops = append(ops, op{path: f.Path, remove: true, orig: cur, existed: true})
		case Block:
			if st.sharedBlock(f, handler) {
				continue
			}
			next, removed, err := RemoveBlock(f.Path, cur, f.Block)
			if err != nil {
				return nil, err
			}
			if !removed {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s: berth block %q was already gone", f.Path, f.Block))
			}
			pending[f.Path] = next
			ops = append(ops, restoreOrWrite(fsys, st, f.Path, next, mode, cur, res)...)
		}
	}
	delete(st.Platforms, handler)
	if len(st.Platforms) == 0 && len(st.Backups) == 0 {
		ops = append(ops, op{path: StatePath, remove: true})
	} else {
		ops = append(ops, op{path: StatePath, data: st.marshal(), mode: 0o600})
	}
	if err := commit(fsys, dedupe(ops)); err != nil {
		return nil, err
	}
	for _, o := range dedupe(ops) {
		if o.path != StatePath && !strings.HasPrefix(o.path, BackupDir+"/") {
			res.Changed = append(res.Changed, o.path)
		}
	}
	return res, nil
}

// skipImports reports whether the imports block f is not needed: the file
// has no berth imports block and its own imports load f's drop-in.
func skipImports(f File, name string, cur []byte, exists bool) bool {
	if f.SkipIfImports == "" || !exists || slices.Contains(Blocks(cur), f.BlockID) {
		return false
	}
	c, err := runtimecfg.ParseContainerd(name, cur)
	if err != nil {
		return false // validation reports it
	}
	for _, imp := range c.Imports {
		if p, ok := runtimecfg.FSPath(name, imp); ok {
			if m, _ := path.Match(p, f.SkipIfImports); m {
				return true
			}
		}
	}
	return false
}

// sharedBlock reports whether another platform owns the same block (the
// imports line every containerd 2.x platform needs).
func (st *State) sharedBlock(f OwnedFile, handler string) bool {
	for h, ps := range st.Platforms {
		if h != handler && slices.Contains(ps.Files, f) {
			return true
		}
	}
	return false
}

// restoreOrWrite decides what a file becomes once a block is out: the
// backup when no berth block is left and the file is otherwise as berth
// found it, else the file without the block.
func restoreOrWrite(fsys FS, st *State, name string, next []byte, mode fs.FileMode, cur []byte, res *Result) []op {
	b, ok := st.Backups[name]
	if !ok || len(Blocks(next)) > 0 {
		return []op{{path: name, data: next, mode: mode, orig: cur, existed: true}}
	}
	if !b.Existed {
		if string(next) == b.Created {
			delete(st.Backups, name)
			return []op{{path: name, remove: true, orig: cur, existed: true}}
		}
		res.Warnings = append(res.Warnings, name+" was changed since berth created it: kept without berth's blocks")
		delete(st.Backups, name)
		return []op{{path: name, data: next, mode: mode, orig: cur, existed: true}}
	}
	orig, err := fsys.ReadFile(b.Path)
	if err != nil || !bytes.Equal(orig, next) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s was changed since berth backed it up: kept without berth's blocks; the original stays in %s", name, b.Path))
		return []op{{path: name, data: next, mode: mode, orig: cur, existed: true}}
	}
	delete(st.Backups, name)
	return []op{
		{path: name, data: orig, mode: fs.FileMode(b.Mode), orig: cur, existed: true},
		{path: b.Path, remove: true},
	}
}

// dedupe keeps the last op per path (a file with several of the
// platform's blocks is written once, in its final form).
func dedupe(ops []op) []op {
	last := map[string]int{}
	for i, o := range ops {
		last[o.path] = i
	}
	var out []op
	for i, o := range ops {
		if last[o.path] == i {
			out = append(out, o)
		}
	}
	return out
}

// commit makes ops happen all or nothing as far as the file system
// allows: every new content is written to a temporary file next to its
// target and synced first (a full disk or read-only file system fails here,
// before anything changed); then the renames and removals run, and a
// failure among them puts back what was already replaced.
func commit(fsys FS, ops []op) error {
	var temps []string
	cleanup := func() {
		for _, t := range temps {
			_ = fsys.Remove(t)
		}
	}
	tmpOf := map[int]string{}
	for i, o := range ops {
		if o.remove {
			continue
		}
		dir := path.Dir(o.path)
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			cleanup()
			return fmt.Errorf("creating %s: %w", dir, err)
		}
		tmp := path.Join(dir, ".berth-"+path.Base(o.path)+".tmp")
		_ = fsys.Remove(tmp) // a leftover of an interrupted run
		if err := writeSynced(fsys, tmp, o.data, o.mode); err != nil {
			_ = fsys.Remove(tmp)
			cleanup()
			return fmt.Errorf("writing %s: %w (nothing was changed)", o.path, err)
		}
		temps = append(temps, tmp)
		tmpOf[i] = tmp
	}
	for i, o := range ops {
		var err error
		if o.remove {
			err = fsys.Remove(o.path)
			if errors.Is(err, fs.ErrNotExist) {
				err = nil
			}
		} else {
			err = fsys.Rename(tmpOf[i], o.path)
		}
		if err != nil {
			rollback(fsys, ops[:i])
			cleanup()
			return fmt.Errorf("replacing %s: %w (earlier changes were rolled back)", o.path, err)
		}
		syncDir(fsys, path.Dir(o.path))
	}
	return nil
}

func writeSynced(fsys FS, name string, data []byte, mode fs.FileMode) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes a rename durable; failure to sync a directory is not
// worth failing an otherwise complete change for.
func syncDir(fsys FS, dir string) {
	if f, err := fsys.OpenFile(dir, os.O_RDONLY, 0); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}

// rollback restores what ops replaced, best effort.
func rollback(fsys FS, done []op) {
	for _, o := range slices.Backward(done) {
		if !o.existed {
			if !o.remove {
				_ = fsys.Remove(o.path)
			}
			continue
		}
		tmp := o.path + ".berth-rollback"
		if writeSynced(fsys, tmp, o.orig, o.mode|0o600) == nil {
			_ = fsys.Rename(tmp, o.path)
		}
	}
}
