package nodeinstall

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/install"
)

// The prefix the node-installer creates, and the record of the directories
// it made there, so that cleanup removes those and nothing the host had.

// createdFile, in the prefix, lists (as a JSON array, relative to the host
// root, outermost first) the prefix's parent directories the installer
// created because they did not exist: cleanup removes them, and the
// prefix, if empty, so that the host is left as it was. Its presence says
// the installer made the prefix itself too (the list is empty when only
// the prefix was missing). It lives in the prefix, which is berth's, since
// the installer may write nothing else on its Node than its labels.
const createdFile = ".node-installer-created-dirs"

// newSuffix names the directory makePrefix builds before it renames it
// into place: "<dir>/.<name>" + newSuffix for the topmost missing
// directory <dir>/<name>. Only makePrefix creates such a name, and
// sweepNewPrefix removes it.
const newSuffix = ".berth-new"

// makePrefix creates the prefix when it does not exist, with its missing
// parents, recording them in createdFile.
func makePrefix(host *hostfs.Writable, prefix string) error {
	return buildPrefix(host, prefix, nil)
}

// buildPrefix is makePrefix; recorded, when set, runs once the new
// directories and their record exist under the temporary name, before
// they are renamed into place (where a test kills the run).
//
// Why a temporary name: the record lives in the prefix, so it cannot be
// written before the prefix exists, and a run killed between creating the
// directories and recording them (the pod deleted by the teardown hook
// while its install runs on) left directories no cleanup knew were
// berth's. Built aside and renamed in one step, the prefix never exists
// without its record; what a killed run leaves is the temporary
// directory, which the next run and cleanup remove (sweepNewPrefix).
func buildPrefix(host *hostfs.Writable, prefix string, recorded func() error) error {
	rel, exists, err := install.ResolveIn(host, prefix)
	if err != nil || exists {
		return err
	}
	if err := sweepNewPrefix(host, rel); err != nil {
		return err
	}
	missing := []string{}
	top := rel
	for d := path.Dir(rel); d != "." && d != "/"; d = path.Dir(d) {
		if _, err := host.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append([]string{d}, missing...)
		top = d
	}
	tmp := newName(top)
	tmpPrefix := tmp + strings.TrimPrefix(rel, top)
	if err := host.MkdirAll(tmpPrefix, 0o755); err != nil {
		return fmt.Errorf("creating the prefix %s: %w", prefix, err)
	}
	b, _ := json.Marshal(missing)
	if err := hostfs.WriteAtomic(host, path.Join(tmpPrefix, createdFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording the directories made for the prefix %s: %w", prefix, err)
	}
	if recorded != nil {
		if err := recorded(); err != nil {
			return err
		}
	}
	if err := host.Rename(tmp, top); err != nil {
		return fmt.Errorf("creating the prefix %s: %w", prefix, err)
	}
	return nil
}

// newName is the temporary name buildPrefix builds dir under.
func newName(dir string) string {
	return path.Join(path.Dir(dir), "."+path.Base(dir)+newSuffix)
}

// sweepNewPrefix removes what a makePrefix killed before its rename left
// for the prefix rel: the temporary directory beside whichever of rel and
// its missing parents was the topmost.
func sweepNewPrefix(host *hostfs.Writable, rel string) error {
	for d := rel; d != "." && d != "/"; d = path.Dir(d) {
		if _, err := host.Lstat(d); err == nil {
			return nil
		}
		tmp := newName(d)
		fi, err := host.Lstat(tmp)
		if err != nil || !fi.IsDir() {
			continue
		}
		r, err := host.OpenRoot(path.Dir(tmp))
		if err != nil {
			return fmt.Errorf("removing /%s, left by a killed run: %w", tmp, err)
		}
		err = r.RemoveAll(path.Base(tmp))
		r.Close()
		if err != nil {
			return fmt.Errorf("removing /%s, left by a killed run: %w", tmp, err)
		}
	}
	return nil
}

// created is what createdDirs read: the prefix (relative to the host root)
// and the parents the installer made for it.
type created struct {
	prefix string
	dirs   []string
}

// createdDirs reads createdFile (nil when there is none). Only ancestors
// of the prefix are taken: the file is in a directory others may write.
func createdDirs(host *hostfs.Writable, prefix string) (*created, error) {
	rel, exists, err := install.ResolveIn(host, prefix)
	if err != nil || !exists {
		return nil, err
	}
	data, err := host.ReadFile(path.Join(rel, createdFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path.Join(prefix, createdFile), err)
	}
	var dirs []string
	if err := json.Unmarshal(data, &dirs); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path.Join(prefix, createdFile), err)
	}
	dirs = slices.DeleteFunc(dirs, func(d string) bool {
		return path.Clean(d) != d || d == "." || !strings.HasPrefix(rel, d+"/")
	})
	return &created{prefix: rel, dirs: dirs}, nil
}

// removeCreated removes createdFile, then the prefix and the parents the
// installer made, deepest first, each only if it is empty (something else
// may have been put there since). It returns what it removed. While the
// prefix holds anything besides createdFile (a file uninstall kept), the
// record stays with it and nothing is removed: a record removed before
// its prefix can be would leave that prefix, once emptied, with nothing
// saying berth made it.
func removeCreated(host *hostfs.Writable, c *created) ([]string, error) {
	ents, err := host.ReadDir(c.prefix)
	if errors.Is(err, fs.ErrNotExist) {
		ents, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading /%s: %w", c.prefix, err)
	}
	for _, e := range ents {
		if e.Name() != createdFile {
			return nil, nil
		}
	}
	var removed []string
	rm := func(rel string) error {
		err := host.Remove(rel)
		switch {
		case err == nil:
			removed = append(removed, "/"+rel)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		default:
			return fmt.Errorf("removing /%s: %w", rel, err)
		}
		return nil
	}
	if err := rm(path.Join(c.prefix, createdFile)); err != nil {
		return removed, err
	}
	dirs := append(slices.Clone(c.dirs), c.prefix)
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for _, d := range dirs {
		if err := rm(d); err != nil {
			return removed, err
		}
	}
	return removed, nil
}
