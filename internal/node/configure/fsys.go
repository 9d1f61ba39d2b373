package configure

import (
	"io/fs"

	"berth.dev/berth/internal/host/hostfs"
)

// FS is the writable host root apply and remove work on. Names are
// slash-separated and relative to the root. *hostfs.Writable is the real
// one (opened once per command from --root); tests wrap it to inject a
// full disk or a read-only file system.
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
type WFile = hostfs.WFile

// resolve resolves name inside fsys with hostfs.Resolve (chroot
// semantics: an absolute target is relative to the root; a link leaving
// the root, a dangling one or a loop is refused, as a refusal). Writing
// through the link keeps the user's link in place.
func resolve(fsys FS, name string) (string, error) {
	rel, _, err := hostfs.Resolve(fsys, name)
	if err != nil {
		return "", pathRefusal{err}
	}
	return rel, nil
}

// pathRefusal is a path the resolver refused: an ErrRefused (exit 1),
// and hostfs.ErrOutsideRoot when the path leaves the root.
type pathRefusal struct{ err error }

func (r pathRefusal) Error() string   { return r.err.Error() + " (nothing was changed)" }
func (r pathRefusal) Unwrap() []error { return []error{ErrRefused, r.err} }
