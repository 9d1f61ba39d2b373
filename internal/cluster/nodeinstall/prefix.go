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
// created because they did not exist: cleanup removes them, if empty, so
// that the host is left as it was. It lives in the prefix, which is
// berth's, since the installer may write nothing else on its Node than
// its labels.
const createdFile = ".node-installer-created-dirs"

// makePrefix creates the prefix when one of its parents is missing,
// recording the parents it creates in createdFile first thing, so that a
// cleanup after a failed install finds them. When the parents exist it
// does nothing: the installer creates the prefix itself and Uninstall
// removes it.
func makePrefix(host *hostfs.Writable, prefix string) error {
	rel, exists, err := install.ResolveIn(host, prefix)
	if err != nil || exists {
		return err
	}
	var missing []string
	for d := path.Dir(rel); d != "." && d != "/"; d = path.Dir(d) {
		if _, err := host.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append([]string{d}, missing...)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := host.MkdirAll(rel, 0o755); err != nil {
		return fmt.Errorf("creating the prefix %s: %w", prefix, err)
	}
	b, _ := json.Marshal(missing)
	if err := hostfs.WriteAtomic(host, path.Join(rel, createdFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("recording the directories made for the prefix %s: %w", prefix, err)
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
// may have been put there since). It returns what it removed.
func removeCreated(host *hostfs.Writable, c *created) ([]string, error) {
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
