package configure

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// Option changes how an apply or remove runs.
type Option func(*tx)

// WithStep calls step at each named step of a change ("intent", "staged",
// "renamed PATH", "committed", "restarting", "restarted", "proven",
// "cleared", "undo"): the fault suite pauses or kills berth there. The
// shipped commands pass none.
func WithStep(step func(name string)) Option {
	return func(t *tx) { t.step = step }
}

// tx is one apply or remove as it runs under the lock: what it changes,
// the runtime it restarts (nil: none), its journal, and the restarts owed
// by earlier killed runs.
type tx struct {
	op, handler, platform, suffix string
	rt                            Runtime
	step                          func(string)

	fsys FS
	// in is the journal of the change, once written.
	in *Intent
	// pending are the restarts earlier changes owe.
	pending []Pending
	// warnings say what recovery did and what is still owed.
	warnings []string
	// reloadOwed is set while a rollback's restart has not proven the
	// runtime back.
	reloadOwed bool
}

func newTx(op, handler, platform, suffix string, rt Runtime, opts []Option) *tx {
	t := &tx{op: op, handler: handler, platform: platform, suffix: suffix, rt: rt}
	for _, o := range opts {
		o(t)
	}
	return t
}

func (t *tx) at(step string) {
	if t.step != nil {
		t.step(step)
	}
}

// recover completes the change a killed run journaled, sweeps its
// temporary files, and takes over the restarts still owed.
func (t *tx) recover() error {
	in, err := ReadIntent(t.fsys)
	if err != nil {
		return err
	}
	if in == nil {
		t.forgetStateDir()
		return nil
	}
	out, said, err := recoverIntent(t.fsys, in)
	if err != nil {
		return err
	}
	sweepTemps(t.fsys, in.dirs())
	if err := writeIntent(t.fsys, out); err != nil {
		return err
	}
	// Once the journal is gone: the directories a rolled-back change
	// made (the journal's own among them) are empty now, and so are those
	// of a completed last remove, which the state listed.
	dirs := slices.Clone(in.Dirs)
	if _, err := t.fsys.Lstat(StatePath); errors.Is(err, fs.ErrNotExist) {
		dirs = append(dirs, in.stateDirs()...)
	}
	removeEmptyDirs(t.fsys, dirs)
	t.warnings = append(t.warnings, said...)
	t.pending = out.Pending
	return nil
}

// owe leaves the journal holding only the restarts still owed (none:
// the journal goes), and warns about them when this run cannot restart.
func (t *tx) owe() error {
	if t.rt == nil {
		for _, p := range t.pending {
			t.warnings = append(t.warnings, "a restart is owed: "+p.Describe())
		}
	}
	t.in = nil
	return writeIntent(t.fsys, &Intent{Version: intentVersion, Pending: t.pending})
}

// restarting marks the journal before a restart on the change's files: a
// rollback after it must restart again.
func (t *tx) restarting() {
	t.at("restarting")
	if t.in != nil && !t.in.Restarted {
		t.in.Restarted = true
		// Best effort: without the mark a killed run's rollback owes no
		// restart, which the next --restart's proof still catches.
		_ = writeIntent(t.fsys, t.in)
	}
}

// reload reports whether a restart is owed whatever the handlers say.
func (t *tx) reload() bool {
	return slices.ContainsFunc(t.pending, func(p Pending) bool { return p.Reload })
}

// pendingBroken says which owed handler is not as its change wants in
// after ("" when each is).
func (t *tx) pendingBroken(after []string) string {
	var why []string
	for _, p := range t.pending {
		switch {
		case p.Reload:
		case p.Gone && slices.Contains(after, p.Handler):
			why = append(why, "the removed handler "+p.Handler+" is still live")
		case !p.Gone && !slices.Contains(after, p.Handler):
			why = append(why, "the applied handler "+p.Handler+" is not live")
		}
	}
	return strings.Join(why, "; ")
}

// ConfigLoader is the optional part of a Runtime that loads its whole
// configuration (main file, imports, drop-ins) as the installed runtime
// parses it: berth never restarts a runtime into a configuration it would
// not load.
type ConfigLoader interface {
	// LoadConfig returns nil when the runtime would load its
	// configuration, else an error naming the file (and line when the
	// runtime says it). note, when not empty, says that the runtime's own
	// parser could not be run and what checked it instead.
	LoadConfig(ctx context.Context) (note string, err error)
}

// loadCheck loads rt's configuration as it stands: an error when it would
// not load. withChange says whether berth's change is in place, for the
// message.
func (t *tx) loadCheck(ctx context.Context, withChange bool) error {
	cl, ok := t.rt.(ConfigLoader)
	if !ok {
		return nil
	}
	note, err := cl.LoadConfig(ctx)
	if note != "" {
		t.warnings = append(t.warnings, note)
	}
	if err == nil {
		return nil
	}
	if withChange {
		return fmt.Errorf("%w: with berth's change, %s would not load its configuration: %w", ErrRefused, t.rt.Name(), err)
	}
	return fmt.Errorf("%w: the configuration %s runs on would not load at its next restart, without any change by berth: %w\nberth changed nothing and did not restart %s: fix that first", ErrRefused, t.rt.Name(), err, t.rt.Name())
}

// named takes the platform and suffix of a remove's handler from the
// state, for the command a journal names.
func (t *tx) named(st *State) {
	if ps, ok := st.Platforms[t.handler]; ok {
		t.platform, t.suffix = ps.Platform, ps.Suffix
	}
}

// Recover completes, under the lock, the change a killed run journaled
// (forward when all its files are in place, else back from its
// originals) and sweeps its temporary files, without restarting
// anything: what it did and the restarts still owed come back as
// warnings, and the owed restarts stay in the journal for the next run
// with --restart (or Pending). Commands that read the state before they
// change anything (remove --all lists the handlers) call it first.
func Recover(fsys FS) ([]string, error) {
	unlock, err := fsys.Lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	t := &tx{fsys: fsys}
	if err := t.recover(); err != nil {
		return nil, err
	}
	for _, p := range t.pending {
		t.warnings = append(t.warnings, "a restart is owed: "+p.Describe())
	}
	return t.warnings, nil
}

// forgetStateDir removes berth's state directory when it is empty and
// there is neither a state nor a journal: a last remove killed between
// clearing its journal and removing the directory left it. Its parents go
// too when empty: nothing but berth's directory was in them.
func (t *tx) forgetStateDir() {
	dir := path.Dir(StatePath)
	if _, err := t.fsys.Lstat(StatePath); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if fi, err := t.fsys.Lstat(dir); err != nil || !fi.IsDir() {
		return
	}
	var chain []string
	for d := dir; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		chain = append(chain, d)
	}
	// Remove refuses a directory that is not empty: a parent with anything
	// else in it stays, and so does the state directory with a backup.
	for _, d := range chain {
		if t.fsys.Remove(d) != nil {
			return
		}
	}
}
