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
//
// Every write and delete goes through an os.Root opened at the prefix,
// itself reached from the host root (--root, a hostfs.Writable) by
// ResolveIn: no symlink or
// ".." leads a write, or a delete, out of the host root, and a prefix whose
// path leaves it is refused before anything is changed (RefusedError).
package install

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/hostfs"
)

// Layout names an installation prefix on a host root.
type Layout struct {
	// Root is the host root, opened for writing once per command. Every
	// path is resolved inside it (ResolveIn).
	Root *hostfs.Writable
	// Prefix is the installation prefix as the host names it: an
	// absolute path such as /opt/berth.
	Prefix string
}

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

// Dir is the prefix's path on this machine, for messages: resolved inside
// Root (so that a prefix reached through an absolute symlink in the root
// names where the files are), or Prefix under Root when it cannot be.
func (l Layout) Dir() string {
	if l.Root == nil {
		return filepath.Clean(l.Prefix)
	}
	if rel, _, err := ResolveIn(l.Root, l.Prefix); err == nil {
		return l.Root.Path(rel)
	}
	return l.Root.Path(strings.TrimPrefix(filepath.ToSlash(l.Prefix), "/"))
}

// Versions is the directory holding every installation.
func (l Layout) Versions() string { return filepath.Join(l.Dir(), versionsDir) }

// Current is the symlink to the live installation.
func (l Layout) Current() string { return filepath.Join(l.Dir(), currentLink) }

// Previous is the symlink to the installation rollback returns to.
func (l Layout) Previous() string { return filepath.Join(l.Dir(), prevLink) }

// Version is the directory of installation id.
func (l Layout) Version(id string) string { return filepath.Join(l.Dir(), versionsDir, id) }

// RecordVersion is the version of the install record berth writes. Records
// without a recordVersion were written before it (version 1): they list
// paths, and the digest of plain files through their component; version 2
// lists every installed file with its SHA-256, size and mode.
const RecordVersion = 2

// Record is what an installation says about itself, in
// versions/<id>/.berth/install.json.
type Record struct {
	// RecordVersion is RecordVersion; 0 in records written before it.
	RecordVersion int      `json:"recordVersion,omitempty"`
	ID            string   `json:"id"`
	Manifest      string   `json:"manifest"`
	Version       string   `json:"version"`
	Digest        string   `json:"digest"`
	Source        string   `json:"source"`
	Platforms     []string `json:"platforms"`
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
	// Files are the files installed, with their digests (record version
	// 2): what uninstall checks before deleting each.
	Files []RecordFile `json:"files,omitempty"`
}

// RecordFile is one installed file, as berth wrote it.
type RecordFile struct {
	// Path is relative to the installation directory.
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Mode is the octal permission bits, e.g. "0755".
	Mode string `json:"mode"`
}

// files returns what the component installed, with the digest each must
// have; a version 1 record knows it for plain files only ("" otherwise).
func (c RecordComponent) files() []RecordFile {
	if len(c.Files) > 0 {
		return c.Files
	}
	out := make([]RecordFile, 0, len(c.Paths))
	for _, p := range c.Paths {
		f := RecordFile{Path: p, Size: -1}
		if c.Plain {
			f.SHA256, f.Size = c.SHA256, c.Size
		}
		out = append(out, f)
	}
	return out
}

// prefixDir is an opened prefix: an os.Root at its resolved directory.
// Every path below is relative to it.
type prefixDir struct {
	r *os.Root
	// dir is its path on this machine, for messages.
	dir string
}

func (p *prefixDir) Close() error { return p.r.Close() }

// path is name's path on this machine, for messages.
func (p *prefixDir) path(name string) string { return filepath.Join(p.dir, filepath.FromSlash(name)) }

// errNoRoot is the error of a Layout without a host root: a dry run on a
// snapshot, which cannot be installed into.
var errNoRoot = errors.New("the host root is not a directory: nothing can be installed there (a snapshot cannot be written)")

// resolve resolves the prefix inside the host root: its path relative to
// the root, whether it exists, and the host root.
func (l Layout) resolve() (*hostfs.Writable, string, bool, error) {
	if l.Root == nil {
		return nil, "", false, errNoRoot
	}
	rel, exists, err := ResolveIn(l.Root, l.Prefix)
	if err != nil {
		if re := (*RefusedError)(nil); errors.As(err, &re) {
			re.Path = "--prefix " + re.Path
		}
		return nil, "", false, err
	}
	return l.Root, rel, exists, nil
}

// open opens the prefix through the host root; a prefix that does not
// exist is created when create is set, else (nil, nil).
func (l Layout) open(create bool) (*prefixDir, error) {
	host, rel, exists, err := l.resolve()
	if err != nil {
		return nil, err
	}
	if !exists {
		if !create {
			return nil, nil
		}
		if err := host.MkdirAll(rel, 0o755); err != nil {
			return nil, fmt.Errorf("creating prefix %s: %w", l.Dir(), err)
		}
	}
	r, err := host.OpenRoot(rel)
	if err != nil {
		return nil, fmt.Errorf("opening prefix %s: %w", l.Dir(), err)
	}
	return &prefixDir{r: r, dir: host.Path(rel)}, nil
}

// link returns the installation id a symlink (current or previous) names,
// "" if it does not exist.
func (p *prefixDir) link(name string) (string, error) {
	t, err := p.r.Readlink(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", p.path(name), err)
	}
	id, ok := strings.CutPrefix(filepath.ToSlash(t), versionsDir+"/")
	if !ok || strings.Contains(id, "/") || id == "" || id == "." || id == ".." {
		return "", fmt.Errorf("%s points to %s, not into %s/: not berth's link", p.path(name), t, versionsDir)
	}
	return id, nil
}

// ReadRecord reads the record of installation id.
func (l Layout) ReadRecord(id string) (*Record, error) {
	p, err := l.open(false)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("installation %s: %s does not exist", id, l.Dir())
	}
	defer p.Close()
	return p.readRecord(id)
}

func (p *prefixDir) readRecord(id string) (*Record, error) {
	name := versionsDir + "/" + id + "/" + recordFile
	if err := checkDirChain(p.r, p.dir, path.Dir(name)); err != nil {
		return nil, fmt.Errorf("installation %s: %w", id, err)
	}
	data, err := p.r.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("installation %s: %w", id, err)
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("installation %s: %s: %w", id, p.path(name), err)
	}
	if r.RecordVersion > RecordVersion {
		return nil, fmt.Errorf("installation %s: %s: record version %d, this berth reads up to %d: use a newer berth", id, p.path(name), r.RecordVersion, RecordVersion)
	}
	return &r, nil
}

// Status is what is installed under a prefix.
type Status struct {
	Prefix   string  `json:"prefix"`
	Current  *Record `json:"current,omitempty"`
	Previous *Record `json:"previous,omitempty"`
}

// Platforms are the platforms the current and the previous installation
// serve, each once: what an uninstall must remove the runtime
// configuration of, since a rollback may have left either in use.
func (s *Status) Platforms() []string {
	var out []string
	for _, r := range []*Record{s.Current, s.Previous} {
		if r == nil {
			continue
		}
		for _, p := range r.Platforms {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// Status reads current and previous; a missing installation is nil. A
// prefix whose path leaves the host root is a *RefusedError.
func (l Layout) Status() (*Status, error) {
	p, err := l.open(false)
	if err != nil {
		return nil, err
	}
	st := &Status{Prefix: l.Dir()}
	if p == nil {
		return st, nil
	}
	defer p.Close()
	return st, p.status(st)
}

func (p *prefixDir) status(st *Status) error {
	for _, x := range []struct {
		link string
		dst  **Record
	}{{currentLink, &st.Current}, {prevLink, &st.Previous}} {
		id, err := p.link(x.link)
		if err != nil {
			return err
		}
		if id == "" {
			continue
		}
		r, err := p.readRecord(id)
		if err != nil {
			return err
		}
		*x.dst = r
	}
	return nil
}

// complete reports whether installation id is all there: its record and
// every path it lists (regular files, plain files with their size).
func (p *prefixDir) complete(id string) (*Record, bool) {
	r, err := p.readRecord(id)
	if err != nil || r.ID != id {
		return nil, false
	}
	dir := versionsDir + "/" + id + "/"
	for _, c := range r.Components {
		for _, f := range c.Paths {
			fi, err := p.r.Lstat(dir + f)
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
func (p *prefixDir) lock() (*Lock, error) {
	if fi, err := p.r.Lstat(lockFile); err == nil && !fi.Mode().IsRegular() {
		return nil, &RefusedError{Path: p.path(lockFile), Why: fmt.Sprintf("it is a %s, not berth's lock file (move it away)", hostfs.TypeName(fi.Mode()))}
	}
	f, err := p.r.OpenFile(lockFile, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", p.path(lockFile), ErrLocked)
		}
		return nil, fmt.Errorf("locking %s: %w", p.path(lockFile), err)
	}
	return &Lock{f: f}, nil
}

// Unlock releases the lock.
func (lk *Lock) Unlock() { lk.f.Close() }

// setLink points name (current or previous) at versions/id atomically: a
// symlink under a temporary name, renamed over the old one. An empty id
// removes the link.
func (p *prefixDir) setLink(name, id string, beforeRename func()) error {
	if id == "" {
		if err := p.r.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	tmp := fmt.Sprintf(".%s.tmp-%d", name, os.Getpid())
	p.r.Remove(tmp)
	if err := p.r.Symlink(versionsDir+"/"+id, tmp); err != nil {
		return fmt.Errorf("switching %s: %w", p.path(name), err)
	}
	if beforeRename != nil {
		beforeRename()
	}
	if err := p.r.Rename(tmp, name); err != nil {
		p.r.Remove(tmp)
		return fmt.Errorf("switching %s: %w", p.path(name), err)
	}
	return p.syncDir(".")
}

// topConflicts returns, for each top-level name of r's paths, an error
// when the prefix holds something there that is not a symlink (a symlink
// is replaced; anything else is the user's and stays).
func (p *prefixDir) topConflicts(r *Record) error {
	for _, top := range tops(r) {
		fi, err := p.r.Lstat(top)
		if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
			continue
		}
		return &RefusedError{Path: p.path(top), Why: fmt.Sprintf("it is a %s, not berth's link to %s/%s (move it away)", hostfs.TypeName(fi.Mode()), currentLink, top)}
	}
	return nil
}

// topLinks makes <prefix>/<top> -> current/<top> for every top-level
// directory or file of the installation's paths.
func (p *prefixDir) topLinks(r *Record) error {
	if err := p.topConflicts(r); err != nil {
		return err
	}
	for _, top := range tops(r) {
		want := currentLink + "/" + top
		if t, err := p.r.Readlink(top); err == nil && t == want {
			continue
		}
		tmp := top + fmt.Sprintf(".tmp-%d", os.Getpid())
		p.r.Remove(tmp)
		if err := p.r.Symlink(want, tmp); err != nil {
			return err
		}
		if err := p.r.Rename(tmp, top); err != nil {
			p.r.Remove(tmp)
			return err
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

func (p *prefixDir) syncDir(name string) error {
	d, err := p.r.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("syncing %s: %w", p.path(name), err)
	}
	return nil
}

// readDir lists directory name of the prefix.
func (p *prefixDir) readDir(name string) ([]fs.DirEntry, error) {
	d, err := p.r.Open(name)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.ReadDir(-1)
}

// cleanTemp removes what an interrupted run left: stage directories and
// temporary links. Partial downloads in the cache stay, to be resumed.
func (p *prefixDir) cleanTemp() error {
	ents, err := p.readDir(versionsDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), stagePrefix) {
			if err := p.r.RemoveAll(versionsDir + "/" + e.Name()); err != nil {
				return fmt.Errorf("removing an interrupted stage: %w", err)
			}
		}
	}
	ents, err = p.readDir(".")
	if err != nil {
		return err
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") && e.Type()&fs.ModeSymlink != 0 {
			p.r.Remove(e.Name())
		}
	}
	return nil
}
