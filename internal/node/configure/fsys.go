package configure

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// FS is the writable host root apply and remove work on. Names are
// slash-separated and relative to the root. OSRoot is the real one; tests
// wrap it to inject a full disk or a read-only file system.
type FS interface {
	ReadFile(name string) ([]byte, error)
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
	MkdirAll(name string, perm fs.FileMode) error
	OpenFile(name string, flag int, perm fs.FileMode) (WFile, error)
	Rename(oldname, newname string) error
	Remove(name string) error
	// Lock takes the root's exclusive configuration lock, waiting for
	// it, and returns its release.
	Lock() (unlock func(), err error)
}

// WFile is an open file being written.
type WFile interface {
	io.Writer
	Sync() error
	Close() error
}

// OSRoot is an FS confined to a directory by os.Root: no path, symlink or
// ".." can reach outside it.
type OSRoot struct{ r *os.Root }

// OpenOSRoot opens dir as the host root.
func OpenOSRoot(dir string) (*OSRoot, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening host root %s: %w", dir, err)
	}
	return &OSRoot{r: r}, nil
}

// Close releases the root.
func (o *OSRoot) Close() error { return o.r.Close() }

// Dir is the directory the root was opened at.
func (o *OSRoot) Dir() string { return o.r.Name() }

func (o *OSRoot) ReadFile(name string) ([]byte, error)      { return o.r.ReadFile(name) }
func (o *OSRoot) Lstat(name string) (fs.FileInfo, error)    { return o.r.Lstat(name) }
func (o *OSRoot) Readlink(name string) (string, error)      { return o.r.Readlink(name) }
func (o *OSRoot) MkdirAll(name string, p fs.FileMode) error { return o.r.MkdirAll(name, p) }
func (o *OSRoot) Rename(oldname, newname string) error      { return o.r.Rename(oldname, newname) }
func (o *OSRoot) Remove(name string) error                  { return o.r.Remove(name) }

// ReadDir lists a directory under the root: the proxy-plugin check reads
// the drop-ins next to berth's.
func (o *OSRoot) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(o.r.FS(), name) }

// OpenFile opens name in the root.
func (o *OSRoot) OpenFile(name string, flag int, perm fs.FileMode) (WFile, error) {
	return o.r.OpenFile(name, flag, perm)
}

// ErrOutsideRoot is a path that resolves outside the host root.
var ErrOutsideRoot = errors.New("resolves outside the host root")

// resolve follows symlinks at name (and only there: os.Root confines the
// directories above it) with chroot semantics, an absolute target being
// relative to the root, and refuses a target outside the root. Writing
// through the link keeps the user's link in place.
func resolve(fsys FS, name string) (string, error) {
	cur := name
	for range 16 {
		fi, err := fsys.Lstat(cur)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return cur, nil
		}
		target, err := fsys.Readlink(cur)
		if err != nil {
			return "", fmt.Errorf("reading link %s: %w", cur, err)
		}
		var next string
		if path.IsAbs(target) {
			next = strings.TrimPrefix(path.Clean(target), "/")
		} else {
			next = path.Join(path.Dir(cur), target)
			if next == ".." || strings.HasPrefix(next, "../") {
				return "", fmt.Errorf("refusing %s: it is a symlink to %s, which %w", name, target, ErrOutsideRoot)
			}
		}
		if next == "" || next == "." {
			return "", fmt.Errorf("refusing %s: it is a symlink to the root itself", name)
		}
		cur = next
	}
	return "", fmt.Errorf("refusing %s: too many levels of symlinks", name)
}
