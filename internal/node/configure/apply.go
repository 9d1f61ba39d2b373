package configure

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/runtimecfg"
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
		return nil, 0, false, fmt.Errorf("%s: not a regular file (%s)", name, hostfs.TypeName(fi.Mode()))
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
	if f.Format == "nydus" {
		if err := runtimecfg.CheckBounds(name, data); err != nil {
			return err
		}
		return toml.Unmarshal(data, new(map[string]any))
	}
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

// nextContent is what host file f (at name, currently cur) becomes:
// skip is true when the file needs nothing from berth. Blocks are merged
// into a file that must parse before and after, in the config version
// they were written for.
func nextContent(f File, name string, cur []byte, exists bool) (next []byte, skip bool, err error) {
	if f.Kind == Owned {
		return f.Content, false, nil
	}
	base := cur
	if !exists {
		if f.Base == nil {
			return nil, false, refused("%s does not exist: berth extends the %s but does not create it", name, f.Purpose)
		}
		base = f.Base
	} else if err := validate(f, name, cur); err != nil {
		return nil, false, refused("refusing to change %s, which does not parse: %w", name, err)
	}
	present := slices.Contains(Blocks(base), f.BlockID)
	if f.Version != 0 && exists && f.Format == "toml" {
		if c, err := runtimecfg.ParseContainerd(name, cur); err == nil && runtimecfg.CRIPlugin(c.Version) != runtimecfg.CRIPlugin(f.Version) {
			return nil, false, refused("%s is a version %d config but the handler is written for version %d: pass --containerd-config-version %d or migrate the file (containerd config migrate)",
				name, c.Version, f.Version, c.Version)
		}
	}
	switch f.When {
	case UnlessImported:
		if skipImports(f, name, base, exists) {
			return nil, true, nil
		}
	case UnlessDefaultRuntimeDefined:
		if !present {
			ok, err := defaultRuntimeDefined(name, base)
			if err != nil {
				return nil, false, refused("refusing to change %s, which does not parse: %w", name, err)
			}
			if ok {
				return nil, true, nil
			}
		}
	}
	content := f.Content
	if f.Import != "" {
		if content, err = importsBlock(name, base, f); err != nil {
			return nil, false, err
		}
	}
	next, err = MergeBlock(name, base, f.BlockID, content, f.Where)
	if err != nil {
		return nil, false, err
	}
	if err := validate(f, name, next); err != nil {
		return nil, false, refused("adding berth's block to %s would break it: %w", name, err)
	}
	return next, false, nil
}

// importsBlock is the imports line of f: the file's own entries (as
// containerd reads them without berth's block) and f.Import.
func importsBlock(name string, base []byte, f File) ([]byte, error) {
	orig, _, err := RemoveBlock(name, base, f.BlockID)
	if err != nil {
		return nil, err
	}
	c, err := runtimecfg.ParseContainerd(name, orig)
	if err != nil {
		return nil, refused("refusing to change %s, which does not parse: %w", name, err)
	}
	list := slices.Clone(c.Imports)
	if !slices.Contains(list, f.Import) {
		list = append(list, f.Import)
	}
	return []byte("imports = " + tomlValue(list) + "\n"), nil
}

// Apply writes r's host files under fsys: all or nothing (every file is
// staged and synced before the first rename), backing up any file it
// modifies the first time, and recording what it owns in the state file.
// When everything is already in place it writes nothing at all. It holds
// the host's configuration lock throughout, so concurrent runs (several
// berth processes, an agent and an operator) apply one after the other.
func Apply(fsys FS, r *Rendered, opts ...Option) (*Result, error) {
	var res *Result
	t := newTx("apply", r.Handler, r.Platform.String(), string(r.Suffix), nil, opts)
	err := locked(fsys, t, func(st *State) ([]op, error) {
		var ops []op
		var err error
		res, ops, err = applyOps(fsys, st, r)
		return ops, err
	}, nil)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(t.warnings, res.Warnings...)
	return res, nil
}

func applyOps(fsys FS, st *State, r *Rendered) (*Result, []op, error) {
	res := &Result{Handler: r.Handler}
	var ops []op
	var owned []OwnedFile
	pending := map[string][]byte{} // files changed earlier in this apply
	for _, f := range r.Host {
		if err := checkProxy(fsys, st, f); err != nil {
			return nil, nil, err
		}
	}
	for _, f := range r.Host {
		name, err := resolve(fsys, f.Path)
		if err != nil {
			return nil, nil, err
		}
		disk, mode, exists, err := readCurrent(fsys, name)
		if err != nil {
			return nil, nil, err
		}
		cur, curExists := disk, exists
		if p, ok := pending[name]; ok {
			cur, curExists = p, true
		}
		next, skip, err := nextContent(f, name, cur, curExists)
		if err != nil {
			return nil, nil, err
		}
		if skip {
			continue
		}
		switch f.Kind {
		case Owned:
			owned = append(owned, OwnedFile{Path: name, Kind: Owned})
			if exists && bytes.Equal(disk, next) {
				continue
			}
			if exists && !st.owns(name) {
				return nil, nil, refused("%s exists and was not written by berth: move it away, then apply again", name)
			}
			ops = append(ops, op{path: name, data: next, mode: 0o644, orig: disk, existed: exists})
		case Block:
			owned = append(owned, OwnedFile{Path: name, Kind: Block, Block: f.BlockID})
			if curExists && bytes.Equal(next, cur) {
				continue
			}
			if _, ok := st.Backups[name]; !ok {
				b := Backup{Existed: exists, Mode: uint32(mode)}
				if exists {
					b.Path = path.Join(BackupDir, name)
					ops = append(ops, op{path: b.Path, data: disk, mode: mode})
				} else {
					b.Created = string(f.Base)
				}
				st.Backups[name] = b
			}
			pending[name] = next
			ops = append(ops, op{path: name, data: next, mode: mode, orig: disk, existed: exists})
		}
	}
	prev, had := st.Platforms[r.Handler]
	ps := PlatformState{Platform: r.Platform.String(), Files: owned, Layout: r.Layout, Suffix: string(r.Suffix)}
	if had && prev.Platform != ps.Platform {
		// kata-deploy's names: platforms that differ only in the
		// distribution, product line or snapshotter share a handler, and a
		// node carries one of them.
		return nil, nil, refused("handler %s is applied for platform %s: a node carries one platform per handler; run berth config remove --platform %s first", r.Handler, prev.Platform, prev.Platform+suffixFlag(prev.Suffix))
	}
	if had && !slices.Equal(prev.Files, ps.Files) {
		gone, ok := movableFiles(st, r, prev.Files, ps.Files)
		if !ok {
			return nil, nil, refused("handler %s was applied with other files (%v): run berth config remove --platform %s first", r.Handler, prev.Files, prev.Platform+suffixFlag(prev.Suffix))
		}
		for _, g := range gone {
			cur, _, exists, err := readCurrent(fsys, g)
			if err != nil {
				return nil, nil, err
			}
			if exists {
				ops = append(ops, op{path: g, remove: true, orig: cur, existed: true})
			}
		}
	}
	ops = dedupe(ops)
	if len(ops) == 0 && had && prev.Platform == ps.Platform {
		return res, nil, nil
	}
	st.Platforms[r.Handler] = ps
	for _, o := range ops {
		if o.path != StatePath && !strings.HasPrefix(o.path, BackupDir+"/") {
			res.Changed = append(res.Changed, o.path)
		}
	}
	return res, ops, nil
}

// movableFiles allows the changes of a platform's files between two
// applies that the operator's own options make: its Kata configuration
// files coming and going under the Kata directory (a Kata drop-in added or
// dropped moves the configuration into a directory of its own, or back),
// and the operator's containerd drop-in (ContainerdUserDropInName) given or
// taken away. It returns the files of before to remove; ok is false for
// any other change.
func movableFiles(st *State, r *Rendered, before, after []OwnedFile) (gone []string, ok bool) {
	movable := func(f OwnedFile) bool {
		return f.Kind == Owned && (r.kataRoot != "" && strings.HasPrefix(f.Path, r.kataRoot+"/") || path.Base(f.Path) == ContainerdUserDropInName)
	}
	for _, f := range after {
		if !slices.Contains(before, f) && !movable(f) {
			return nil, false
		}
	}
	for _, f := range before {
		if slices.Contains(after, f) {
			continue
		}
		if !movable(f) {
			return nil, false
		}
		if !st.sharedBlock(f, r.Handler) {
			gone = append(gone, f.Path)
		}
	}
	return gone, true
}

// Remove removes what berth wrote for handler: its own files, its blocks,
// and, once the last block of a file is gone, restores the file's backup
// byte for byte (or deletes a file berth created).
func Remove(fsys FS, handler string, opts ...Option) (*Result, error) {
	var res *Result
	t := newTx("remove", handler, "", "", nil, opts)
	err := locked(fsys, t, func(st *State) ([]op, error) {
		t.named(st)
		var ops []op
		var err error
		res, ops, err = removeOps(fsys, st, handler)
		return ops, err
	}, nil)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(t.warnings, res.Warnings...)
	return res, nil
}

func removeOps(fsys FS, st *State, handler string) (*Result, []op, error) {
	res := &Result{Handler: handler}
	ps, ok := st.Platforms[handler]
	if !ok {
		return res, nil, nil
	}
	var ops []op
	pending := map[string][]byte{} // files changed earlier in this remove
	for _, f := range slices.Backward(ps.Files) {
		cur, mode, exists, err := readCurrent(fsys, f.Path)
		if p, ok := pending[f.Path]; ok {
			cur, exists, err = p, true, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if !exists {
			res.Warnings = append(res.Warnings, f.Path+" was already gone")
			continue
		}
		switch f.Kind {
		case Owned:
			if st.sharedBlock(f, handler) {
				continue // another platform's too (berth's nydus config and unit)
			}
			ops = append(ops, op{path: f.Path, remove: true, orig: cur, existed: true})
		case Block:
			if st.sharedBlock(f, handler) {
				continue
			}
			next, removed, err := RemoveBlock(f.Path, cur, f.Block)
			if err != nil {
				return nil, nil, err
			}
			if !removed {
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s: berth block %q was already gone", f.Path, f.Block))
			}
			pending[f.Path] = next
			ops = append(ops, restoreOrWrite(fsys, st, f.Path, next, mode, cur, res)...)
		}
	}
	delete(st.Platforms, handler)
	ops = dedupe(ops)
	for _, o := range ops {
		if !strings.HasPrefix(o.path, BackupDir+"/") {
			res.Changed = append(res.Changed, o.path)
		}
	}
	return res, ops, nil
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
// imports line every containerd 2.x platform needs) or the same whole
// file (the nydus-snapshotter files every nydus platform needs).
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
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// Not "changed since": the backup could not be read, and one
		// behind a link out of the root (the resolver's refusal, or
		// os.Root's "path escapes from parent") is refused, never read.
		why := fmt.Sprintf("cannot be read (%v)", err)
		var ue *hostfs.UnsafePathError
		switch {
		case errors.As(err, &ue):
			why = "is refused: " + ue.Why
		case strings.Contains(err.Error(), "path escapes from parent"):
			why = "is refused: it " + hostfs.ErrOutsideRoot.Error()
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("%s: kept without berth's blocks, not restored: its backup %s %s", name, b.Path, why))
		return []op{{path: name, data: next, mode: mode, orig: cur, existed: true}}
	}
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
// failure among them puts back what was already replaced. step, when not
// nil, is called after the staging ("staged") and after each rename or
// removal ("renamed PATH"): the fault suite's kill points.
func commit(fsys FS, ops []op, step func(string)) error {
	if step == nil {
		step = func(string) {}
	}
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
		tmp := hostfs.TempName(o.path)
		if err := hostfs.WriteSynced(fsys, tmp, o.data, o.mode); err != nil {
			_ = fsys.Remove(tmp)
			cleanup()
			return fmt.Errorf("writing %s: %w (nothing was changed)", o.path, err)
		}
		temps = append(temps, tmp)
		tmpOf[i] = tmp
	}
	step("staged")
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
		hostfs.SyncDir(fsys, path.Dir(o.path))
		step("renamed " + o.path)
	}
	return nil
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
		_ = hostfs.WriteAtomic(fsys, o.path, o.orig, o.mode|0o600)
	}
}
