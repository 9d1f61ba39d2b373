package configure

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/hostfs"
)

// IntentPath is the journal of the change in progress, next to the state:
// written (synced, renamed into place) before the first file of an apply
// or remove is replaced, removed once the change is complete and, with
// --restart, proven live. A journal found at the start of a run is a run
// that was killed: it is completed forward or rolled back first.
const IntentPath = "var/lib/berth/config-intent.json"

const intentVersion = 1

// Intent is the journal of one change: every file it replaces with the
// digest of its new content and its previous content, and the restarts
// owed to changes whose files are complete but whose runtime was not yet
// restarted and proven.
type Intent struct {
	Version int `json:"version"`
	// Op is "apply" or "remove"; Handler, Platform and Suffix name what.
	Op       string `json:"op,omitempty"`
	Handler  string `json:"handler,omitempty"`
	Platform string `json:"platform,omitempty"`
	Suffix   string `json:"suffix,omitempty"`
	// Restart is set when --restart was asked: the change is complete
	// only once the runtime was restarted and the handler proven.
	Restart bool `json:"restart,omitempty"`
	// Restarted is set before berth restarts the runtime on the new files:
	// a rollback after it must restart the runtime again.
	Restarted bool `json:"restarted,omitempty"`
	// Undo is set before berth puts the previous files back after a
	// failed restart: recovery then always rolls back.
	Undo bool `json:"undo,omitempty"`
	// Files are the files the change replaces or removes (the state file
	// and backups among them).
	Files []IntentFile `json:"files,omitempty"`
	// Dirs are the directories the change creates, removed on rollback
	// when empty.
	Dirs []string `json:"dirs,omitempty"`
	// Pending are restarts owed by earlier changes.
	Pending []Pending `json:"pending,omitempty"`
}

// IntentFile is one file of a change.
type IntentFile struct {
	Path string `json:"path"`
	// Digest is the sha256 of the new content; empty when the change
	// removes the file.
	Digest string `json:"digest,omitempty"`
	// Existed, Orig and OrigMode are the file before the change.
	Existed  bool   `json:"existed"`
	Orig     []byte `json:"orig,omitempty"`
	OrigMode uint32 `json:"origMode,omitempty"`
}

// Pending is a restart owed for a handler: its files are in place, but
// the runtime was not restarted and proven (a run was killed, or the
// recovering command did not restart). Gone is set for a remove.
type Pending struct {
	Handler  string `json:"handler"`
	Platform string `json:"platform,omitempty"`
	Suffix   string `json:"suffix,omitempty"`
	Gone     bool   `json:"gone,omitempty"`
	// Reload is a restart owed after a rollback: the runtime may still
	// run (or have failed on) the rolled-back files; no handler is
	// proven beyond those live before.
	Reload bool `json:"reload,omitempty"`
	// Interrupted is a change whose files are not all in place yet (its
	// run was killed and no run since completed it): the next command
	// that touches the runtime config completes it forward or back.
	Interrupted bool `json:"interrupted,omitempty"`
	// NoRestart is an interrupted change that did not ask for a restart.
	NoRestart bool `json:"noRestart,omitempty"`
}

// Owed lists what in owes: the interrupted change itself, if its files
// are not complete yet, and the restarts earlier changes owe.
func (in *Intent) Owed() []Pending {
	var out []Pending
	if len(in.Files) > 0 {
		out = append(out, Pending{Handler: in.Handler, Platform: in.Platform, Suffix: in.Suffix, Gone: in.Op == "remove", Interrupted: true, NoRestart: !in.Restart})
	}
	return append(out, in.Pending...)
}

// Command is the command that completes p.
func (p Pending) Command() string {
	verb := "apply"
	if p.Gone {
		verb = "remove"
	}
	plat := p.Platform
	if plat == "" {
		plat = p.Handler
	}
	s := "berth config " + verb + " --platform " + plat
	if p.Suffix != "" {
		s += " --install-suffix " + p.Suffix
	}
	if p.NoRestart {
		return s
	}
	return s + " --restart"
}

// Describe says what p owes, for a warning or berth verify.
func (p Pending) Describe() string {
	switch {
	case p.Interrupted:
		return fmt.Sprintf("an interrupted %s of %s: the next berth command that changes the runtime configuration completes it (%s)", map[bool]string{true: "remove", false: "apply"}[p.Gone], p.Handler, p.Command())
	case p.Reload:
		return fmt.Sprintf("a change of %s was rolled back after the runtime was restarted: the runtime must be restarted on the previous files (%s)", p.Handler, p.Command())
	case p.Gone:
		return fmt.Sprintf("%s was removed but the runtime was not restarted: it may still run the handler (%s)", p.Handler, p.Command())
	}
	return fmt.Sprintf("%s was applied but the runtime was not restarted and the handler not proven live (%s)", p.Handler, p.Command())
}

// ParseIntent decodes a journal (IntentPath).
func ParseIntent(data []byte) (*Intent, error) {
	var in Intent
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("%s: %w (the journal of an interrupted change; the originals are in %s)", IntentPath, err, BackupDir)
	}
	if in.Version != intentVersion {
		return nil, fmt.Errorf("%s: journal version %d, expected %d", IntentPath, in.Version, intentVersion)
	}
	return &in, nil
}

// ReadIntent returns the journal of an unfinished change, nil when there
// is none: berth verify names it and the command that completes it.
func ReadIntent(fsys FS) (*Intent, error) {
	data, err := fsys.ReadFile(IntentPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", IntentPath, err)
	}
	return ParseIntent(data)
}

func (in *Intent) marshal() []byte {
	b, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("configure: intent: %v", err))
	}
	return append(b, '\n')
}

// writeIntent puts in in place atomically (or removes the journal when
// in owes nothing).
func writeIntent(fsys FS, in *Intent) error {
	if in == nil || (len(in.Files) == 0 && len(in.Pending) == 0) {
		return clearIntent(fsys)
	}
	if err := fsys.MkdirAll(path.Dir(IntentPath), 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", path.Dir(IntentPath), err)
	}
	if err := hostfs.WriteAtomic(fsys, IntentPath, in.marshal(), 0o600); err != nil {
		return fmt.Errorf("writing the journal %s: %w (nothing was changed)", IntentPath, err)
	}
	return nil
}

// clearIntent removes the journal: the change it records is complete.
func clearIntent(fsys FS) error {
	if err := fsys.Remove(IntentPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing the journal %s: %w", IntentPath, err)
	}
	hostfs.SyncDir(fsys, path.Dir(IntentPath))
	return nil
}

func digest(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

// newIntent journals ops (and undo, what each file was), and the
// directories the change creates.
func newIntent(tx *tx, ops, undo []op, dirs []string) *Intent {
	in := &Intent{Version: intentVersion, Op: tx.op, Handler: tx.handler, Platform: tx.platform, Suffix: tx.suffix,
		Restart: tx.rt != nil, Dirs: slices.Clone(dirs), Pending: tx.pending}
	before := map[string]op{}
	for _, u := range undo {
		before[u.path] = u
	}
	for _, o := range ops {
		f := IntentFile{Path: o.path}
		if !o.remove {
			f.Digest = digest(o.data)
		}
		if u, ok := before[o.path]; ok && !u.remove {
			f.Existed, f.Orig, f.OrigMode = true, u.data, uint32(u.mode)
		}
		in.Files = append(in.Files, f)
	}
	return in
}

// complete reports whether every file of in has its new content (or is
// gone when removed).
func (in *Intent) complete(fsys FS) bool {
	for _, f := range in.Files {
		data, _, exists, err := readCurrent(fsys, f.Path)
		if err != nil {
			return false
		}
		if f.Digest == "" {
			if exists {
				return false
			}
			continue
		}
		if !exists || digest(data) != f.Digest {
			return false
		}
	}
	return true
}

// rollbackOps put back the files of in that the change replaced or
// removed: a file still as it was is not rewritten, and one that is
// neither as it was nor as the change wrote it (edited since) is left
// alone and named in kept.
func (in *Intent) rollbackOps(fsys FS) (ops []op, kept []string) {
	for _, f := range in.Files {
		cur, _, exists, err := readCurrent(fsys, f.Path)
		switch {
		case err != nil:
			kept = append(kept, f.Path)
			continue
		case f.Existed && exists && bytes.Equal(cur, f.Orig), !f.Existed && !exists:
			continue // as it was
		case f.Digest != "" && exists && digest(cur) == f.Digest, f.Digest == "" && !exists:
			// as the change left it: put back
		default:
			kept = append(kept, f.Path)
			continue
		}
		if f.Existed {
			ops = append(ops, op{path: f.Path, data: f.Orig, mode: fs.FileMode(f.OrigMode)})
		} else {
			ops = append(ops, op{path: f.Path, remove: true})
		}
	}
	return ops, kept
}

// stateDirs are the directories berth created as the state before the
// change listed them (the state directory among them): once berth owns
// nothing, they go when empty.
func (in *Intent) stateDirs() []string {
	for _, f := range in.Files {
		if f.Path != StatePath || !f.Existed {
			continue
		}
		var st State
		if json.Unmarshal(f.Orig, &st) == nil {
			return st.Dirs
		}
	}
	return nil
}

// dirs are the directories in's files are in (where their temporary
// files are).
func (in *Intent) dirs() []string {
	var out []string
	for _, f := range in.Files {
		out = append(out, path.Dir(f.Path))
	}
	return out
}

// recoverIntent completes the change a killed run left: forward when
// every new file is in place (its restart, if asked, still owed: it goes
// to Pending), else back to the journal's originals. It returns what is
// still owed (nil: nothing) and what it did, for warnings.
func recoverIntent(fsys FS, in *Intent) (*Intent, []string, error) {
	var said []string
	out := &Intent{Version: intentVersion, Pending: slices.Clone(in.Pending)}
	if len(in.Files) > 0 {
		what := fmt.Sprintf("an interrupted %s of %s", in.Op, in.Handler)
		if !in.Undo && in.complete(fsys) {
			said = append(said, what+" had written all its files: completed")
			if in.Restart {
				out.Pending = append(out.Pending, Pending{Handler: in.Handler, Platform: in.Platform, Suffix: in.Suffix, Gone: in.Op == "remove"})
			}
		} else {
			ops, kept := in.rollbackOps(fsys)
			if err := commit(fsys, ops, nil); err != nil {
				return nil, nil, fmt.Errorf("rolling back %s from %s: %w", what, IntentPath, err)
			}
			if len(kept) > 0 {
				said = append(said, fmt.Sprintf("%s was rolled back, but %s changed since and kept as it is", what, strings.Join(kept, ", ")))
			} else {
				said = append(said, what+" was rolled back: every file is as before it")
			}
			if in.Restarted {
				out.Pending = append(out.Pending, Pending{Handler: in.Handler, Platform: in.Platform, Suffix: in.Suffix, Reload: true})
			}
		}
	}
	return out, said, nil
}

// isBerthTemp reports whether name is a temporary file a berth run
// makes next to a file it replaces: what a killed run leaves behind.
func isBerthTemp(name string) bool {
	return (strings.HasPrefix(name, ".berth-") && strings.HasSuffix(name, ".tmp")) || strings.Contains(name, ".berth-rollback.")
}

// sweepTemps removes berth's temporary files from dirs: the lock is held,
// so no other berth run is writing them.
func sweepTemps(fsys FS, dirs []string) {
	l, ok := fsys.(dirLister)
	if !ok {
		return
	}
	slices.Sort(dirs)
	for _, d := range slices.Compact(dirs) {
		ents, err := l.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.Type().IsRegular() && isBerthTemp(e.Name()) {
				_ = fsys.Remove(path.Join(d, e.Name()))
			}
		}
	}
}

// stateDirsOf are the directories of every file st records and of its
// backups: where temporary files of earlier runs may be.
func stateDirsOf(st *State) []string {
	out := []string{path.Dir(StatePath)}
	for _, ps := range st.Platforms {
		for _, f := range ps.Files {
			out = append(out, path.Dir(f.Path))
		}
	}
	for name, b := range st.Backups {
		out = append(out, path.Dir(name))
		if b.Path != "" {
			out = append(out, path.Dir(b.Path))
		}
	}
	return out
}
