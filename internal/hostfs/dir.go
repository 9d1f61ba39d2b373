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

// Dir is an offline host root backed by a directory: a fixture tree, an
// unpacked snapshot, or a host mounted somewhere without --live. Nothing in
// it is ever executed.
type Dir struct {
	path     string
	fsys     FS
	recorded Recorded
}

// OpenDir opens dir as an offline root and loads its recorded outputs, if
// any. A malformed recorded-outputs file is an error naming it.
func OpenDir(dir string) (*Dir, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("opening host root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("opening host root %s: not a directory", dir)
	}
	return openDirFS(dir, os.DirFS(dir).(FS))
}

// KeepFile marks an otherwise empty directory of a fixture tree, because git
// does not store empty directories; directory roots leave it out of every
// listing, so an empty sys/kernel/iommu_groups stays empty.
const KeepFile = ".keep"

// keepHidden hides KeepFile from directory listings.
type keepHidden struct{ FS }

// ReadDir lists dir without KeepFile.
func (k keepHidden) ReadDir(dir string) ([]fs.DirEntry, error) {
	ents, err := k.FS.ReadDir(dir)
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return e.Name() == KeepFile }), err
}

// openDirFS serves fsys as an offline root described as path, loading its
// recorded outputs.
func openDirFS(path string, fsys FS) (*Dir, error) {
	d := &Dir{path: path, fsys: keepHidden{fsys}}
	b, err := d.fsys.ReadFile(RecordedFile)
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
	}
	return d, nil
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
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decoding recorded probe %q from %s: %w", name, RecordedFile, err)
	}
	return nil
}
