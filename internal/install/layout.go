// Package install installs the components a platform needs from a
// component manifest into a prefix, and switches, rolls back and removes
// installations. Workflow is berth install as a whole: checks, install,
// runtime configuration, restart and verification of every platform.
//
// Layout under the prefix:
//
//	versions/<manifest-sha256>-<set>/  one complete installation each (set:
//	                                   12 hex digits naming the platforms'
//	                                   component set)
//	current  -> versions/<id>          the live installation
//	previous -> versions/<id>          what berth rollback returns to
//	bin      -> current/bin            one stable link per top-level
//	share    -> current/share          directory, so that runtime
//	...                                configuration never names a version
//	.lock                              flock: one installer at a time
//
// An installation is staged in versions/.stage-<id>-<pid>, renamed into
// versions/ only when complete, and made live by renaming a new symlink over
// current: at every instant current names a complete installation, whatever
// kills the installer.
package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Layout names the paths under a prefix; Prefix is a real path on this
// machine (under --root when one is given).
type Layout struct{ Prefix string }

// Names of berth's own entries in the prefix.
const (
	versionsDir = "versions"
	currentLink = "current"
	prevLink    = "previous"
	lockFile    = ".lock"
	stagePrefix = ".stage-"
	recordDir   = ".berth"
	recordFile  = ".berth/install.json"
)

// Versions is the directory holding every installation.
func (l Layout) Versions() string { return filepath.Join(l.Prefix, versionsDir) }

// Current is the symlink to the live installation.
func (l Layout) Current() string { return filepath.Join(l.Prefix, currentLink) }

// Previous is the symlink to the installation rollback returns to.
func (l Layout) Previous() string { return filepath.Join(l.Prefix, prevLink) }

// Version is the directory of installation id.
func (l Layout) Version(id string) string { return filepath.Join(l.Prefix, versionsDir, id) }

// Record is what an installation says about itself, in
// versions/<id>/.berth/install.json.
type Record struct {
	ID        string   `json:"id"`
	Manifest  string   `json:"manifest"`
	Version   string   `json:"version"`
	Digest    string   `json:"digest"`
	Source    string   `json:"source"`
	Platforms []string `json:"platforms"`
	// Components are installed in this order.
	Components []RecordComponent `json:"components"`
	// Installed is when the installation was staged.
	Installed time.Time `json:"installed"`
}

// RecordComponent is one installed component.
type RecordComponent struct {
	Name    string   `json:"name"`
	Version string   `json:"version"`
	SHA256  string   `json:"sha256"`
	Size    int64    `json:"size"`
	Paths   []string `json:"paths"`
	// Plain is true for a plain file (its installed size is Size).
	Plain bool `json:"plain,omitempty"`
}

// link returns the installation id a symlink (current or previous) names,
// "" if it does not exist.
func (l Layout) link(p string) (string, error) {
	t, err := os.Readlink(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", p, err)
	}
	id, ok := strings.CutPrefix(filepath.ToSlash(t), versionsDir+"/")
	if !ok || strings.Contains(id, "/") || id == "" {
		return "", fmt.Errorf("%s points to %s, not into %s/: not berth's link", p, t, versionsDir)
	}
	return id, nil
}

// ReadRecord reads the record of installation id.
func (l Layout) ReadRecord(id string) (*Record, error) {
	p := filepath.Join(l.Version(id), recordFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("installation %s: %w", id, err)
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("installation %s: %s: %w", id, p, err)
	}
	return &r, nil
}

// Status is what is installed under a prefix.
type Status struct {
	Prefix   string  `json:"prefix"`
	Current  *Record `json:"current,omitempty"`
	Previous *Record `json:"previous,omitempty"`
}

// Status reads current and previous; a missing installation is nil.
func (l Layout) Status() (*Status, error) {
	st := &Status{Prefix: l.Prefix}
	for _, x := range []struct {
		link string
		dst  **Record
	}{{l.Current(), &st.Current}, {l.Previous(), &st.Previous}} {
		id, err := l.link(x.link)
		if err != nil {
			return nil, err
		}
		if id == "" {
			continue
		}
		r, err := l.ReadRecord(id)
		if err != nil {
			return nil, err
		}
		*x.dst = r
	}
	return st, nil
}

// complete reports whether installation id is all there: its record and
// every path it lists (plain files with their size).
func (l Layout) complete(id string) (*Record, bool) {
	r, err := l.ReadRecord(id)
	if err != nil || r.ID != id {
		return nil, false
	}
	dir := l.Version(id)
	for _, c := range r.Components {
		for _, p := range c.Paths {
			fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)))
			if err != nil || !fi.Mode().IsRegular() || (c.Plain && fi.Size() != c.Size) {
				return r, false
			}
		}
	}
	return r, true
}

// Lock is a held flock on <prefix>/.lock.
type Lock struct{ f *os.File }

// ErrLocked is returned when another process holds the lock.
var ErrLocked = errors.New("another berth install, rollback or uninstall is running on this prefix")

// lock takes the prefix's lock without waiting.
func (l Layout) lock() (*Lock, error) {
	if err := os.MkdirAll(l.Prefix, 0o755); err != nil {
		return nil, fmt.Errorf("creating prefix: %w", err)
	}
	p := filepath.Join(l.Prefix, lockFile)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", p, ErrLocked)
		}
		return nil, fmt.Errorf("locking %s: %w", p, err)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock.
func (lk *Lock) Unlock() { lk.f.Close() }

// setLink points name (current or previous) at versions/id atomically: a
// symlink under a temporary name, renamed over the old one. An empty id
// removes the link.
func (l Layout) setLink(name, id string, beforeRename func()) error {
	p := filepath.Join(l.Prefix, name)
	if id == "" {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	tmp := filepath.Join(l.Prefix, fmt.Sprintf(".%s.tmp-%d", name, os.Getpid()))
	os.Remove(tmp)
	if err := os.Symlink(versionsDir+"/"+id, tmp); err != nil {
		return fmt.Errorf("switching %s: %w", p, err)
	}
	if beforeRename != nil {
		beforeRename()
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("switching %s: %w", p, err)
	}
	return syncDir(l.Prefix)
}

// topLinks makes <prefix>/<top> -> current/<top> for every top-level
// directory or file of the installation's paths.
func (l Layout) topLinks(r *Record) error {
	for _, top := range tops(r) {
		p := filepath.Join(l.Prefix, top)
		want := currentLink + "/" + top
		t, err := os.Readlink(p)
		switch {
		case err == nil && t == want:
			continue
		case err == nil || errors.Is(err, fs.ErrNotExist):
			tmp := p + fmt.Sprintf(".tmp-%d", os.Getpid())
			os.Remove(tmp)
			if err := os.Symlink(want, tmp); err != nil {
				return err
			}
			if err := os.Rename(tmp, p); err != nil {
				os.Remove(tmp)
				return err
			}
		default:
			return fmt.Errorf("%s exists and is not berth's link to %s: move it away", p, want)
		}
	}
	return nil
}

func tops(r *Record) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range r.Components {
		for _, p := range c.Paths {
			top, _, _ := strings.Cut(p, "/")
			if !seen[top] {
				seen[top] = true
				out = append(out, top)
			}
		}
	}
	return out
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}

// cleanTemp removes what an interrupted run left: stage directories and
// temporary links. Partial downloads in the cache stay, to be resumed.
func (l Layout) cleanTemp() error {
	ents, err := os.ReadDir(l.Versions())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), stagePrefix) {
			if err := os.RemoveAll(filepath.Join(l.Versions(), e.Name())); err != nil {
				return fmt.Errorf("removing an interrupted stage: %w", err)
			}
		}
	}
	ents, err = os.ReadDir(l.Prefix)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") && e.Type()&fs.ModeSymlink != 0 {
			os.Remove(filepath.Join(l.Prefix, e.Name()))
		}
	}
	return nil
}

// gc removes installations other than keep.
func (l Layout) gc(keep ...string) error {
	ents, err := os.ReadDir(l.Versions())
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, stagePrefix) || containsStr(keep, n) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(l.Versions(), n)); err != nil {
			return fmt.Errorf("removing old installation %s: %w", n, err)
		}
	}
	return nil
}

func containsStr(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
