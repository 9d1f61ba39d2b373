package hostfs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
)

// RecordedFile is where a snapshot or fixture keeps the outputs of commands
// and live probes, relative to the root. Its format is Recorded.
const RecordedFile = ".berth/recorded.json"

// RecordedSchemaVersion is the version of the recorded-outputs format.
const RecordedSchemaVersion = 1

// Recorded is the recorded-outputs file of an offline root: what commands
// printed and what live probes returned on the host the root was taken
// from. Commands are looked up by exact argv.
type Recorded struct {
	SchemaVersion int             `json:"schemaVersion"`
	Commands      []CommandResult `json:"commands,omitempty"`
	// Probes maps a probe name ("kvm", "qemu", "cpuid", "devices") to the
	// JSON value the probe produced.
	Probes map[string]json.RawMessage `json:"probes,omitempty"`
}

// maxRecorded caps the recorded-outputs file and the snapshot index.
const maxRecorded = DefaultMaxFile

// maxProbe caps one recorded probe value.
const maxProbe = 1 << 20

// Dir is an offline host root backed by a directory: a fixture tree, an
// unpacked snapshot, or a host mounted somewhere without --live. Nothing in
// it is ever executed, and every path is resolved inside it as in a
// chroot (see confinedFS).
type Dir struct {
	path     string
	cfs      *confinedFS
	fsys     FS
	recorded Recorded
}

// OpenDir opens dir as an offline root and loads its recorded outputs, if
// any. A malformed recorded-outputs file is an error naming it.
func OpenDir(dir string) (*Dir, error) { return openDirWith(dir, confineOptions{}) }

// openDirWith is OpenDir with opt's fallbacks.
func openDirWith(dir string, opt confineOptions) (*Dir, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("opening host root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("opening host root %s: not a directory", dir)
	}
	c, err := newConfinedFS(dir, opt)
	if err != nil {
		return nil, fmt.Errorf("opening host root: %w", err)
	}
	d, err := openDirFS(dir, c)
	if err != nil {
		c.close()
		return nil, err
	}
	return d, nil
}

// KeepFile marks an otherwise empty directory of a fixture tree, because git
// does not store empty directories; directory roots leave it out of every
// listing, so an empty sys/kernel/iommu_groups stays empty.
const KeepFile = ".keep"

// keepHidden hides KeepFile from directory listings.
type keepHidden struct{ *confinedFS }

// ReadDir lists dir without KeepFile.
func (k keepHidden) ReadDir(dir string) ([]fs.DirEntry, error) {
	ents, err := k.confinedFS.ReadDir(dir)
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return e.Name() == KeepFile }), err
}

// openDirFS serves c as an offline root described as path, loading its
// recorded outputs and the snapshot index (which files were truncated or
// special on the host).
func openDirFS(path string, c *confinedFS) (*Dir, error) {
	d := &Dir{path: path, cfs: c, fsys: keepHidden{c}}
	b, err := c.ReadFileLimit(RecordedFile, maxRecorded)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("reading %s in %s: %w", RecordedFile, path, err)
	default:
		if err := json.Unmarshal(b, &d.recorded); err != nil {
			return nil, fmt.Errorf("parsing %s in %s: %w", RecordedFile, path, err)
		}
		if d.recorded.SchemaVersion != RecordedSchemaVersion {
			return nil, fmt.Errorf("parsing %s in %s: schemaVersion %d, expected %d", RecordedFile, path, d.recorded.SchemaVersion, RecordedSchemaVersion)
		}
		for i := range d.recorded.Commands {
			capOutputs(&d.recorded.Commands[i])
		}
	}
	if err := d.loadIndex(); err != nil {
		return nil, fmt.Errorf("reading %s in %s: %w", SnapshotIndex, path, err)
	}
	return d, nil
}

// loadIndex marks the files the snapshot index lists as truncated or
// special, by device and inode, so that every path leading to them reads
// as it did on the host.
func (d *Dir) loadIndex() error {
	b, err := d.cfs.ReadFileLimit(SnapshotIndex, maxRecorded)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var idx snapshotIndex
	if err := json.Unmarshal(b, &idx); err != nil {
		return err
	}
	mark := func(p string, e error) {
		fi, err := d.cfs.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() {
			return
		}
		if d.cfs.marked == nil {
			d.cfs.marked = map[fileID]error{}
		}
		d.cfs.marked[fi.(*fileInfo).id()] = e
	}
	for _, t := range idx.Truncated {
		mark(t.Path, &TruncatedError{Kept: t.Kept, Size: t.Size})
	}
	for _, s := range idx.Special {
		mark(s.Path, &NotRegularError{Kind: s.Kind})
	}
	return nil
}

// FS implements Root.
func (d *Dir) FS() FS { return d.fsys }

// Live implements Root: a directory root is never live.
func (d *Dir) Live() bool { return false }

// Path implements Root.
func (d *Dir) Path() string { return d.path }

// Run implements Root by looking the command up in the recorded outputs.
func (d *Dir) Run(_ context.Context, argv ...string) (CommandResult, error) {
	for _, c := range d.recorded.Commands {
		if slices.Equal(c.Argv, argv) {
			c.Recorded = true
			return c, nil
		}
	}
	return CommandResult{Argv: argv}, ErrOffline
}

// Probe implements Root by decoding the recorded probe value.
func (d *Dir) Probe(name string, v any) error {
	raw, ok := d.recorded.Probes[name]
	if !ok {
		return ErrOffline
	}
	if len(raw) > maxProbe {
		return fmt.Errorf("recorded probe %q in %s: larger than %d bytes", name, RecordedFile, maxProbe)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decoding recorded probe %q from %s: %w", name, RecordedFile, err)
	}
	return nil
}
