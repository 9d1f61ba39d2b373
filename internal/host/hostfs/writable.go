package hostfs

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrOutsideRoot marks a path berth refuses to write, delete or read for
// an edit because it resolves outside the host root (--root).
var ErrOutsideRoot = errors.New("resolves outside the host root")

// MaxConfigFile caps a runtime configuration file berth edits or imports
// (containerd's or CRI-O's config.toml, a drop-in, a Kata configuration):
// the cap discovery reads with. The largest real ones are about 50 KiB.
// What makes decoding slow is the number of keys, which runtimecfg
// bounds (MaxEntries); 15 MiB of one string or of comments takes about a
// second for a whole apply.
const MaxConfigFile = DefaultMaxFile

// UnsafePathError is a path the resolver (Resolve) refuses: its resolution
// leaves the host root, meets a dangling or looping symlink, or passes
// through something that is not a directory. Nothing has been opened or
// changed. It matches ErrOutsideRoot when Outside is set.
type UnsafePathError struct {
	// Path is the path as the host names it.
	Path string
	// Why says what is wrong with it.
	Why string
	// Outside is set when the path resolves outside the host root.
	Outside bool
}

func (e *UnsafePathError) Error() string { return fmt.Sprintf("refusing %s: %s", e.Path, e.Why) }

// Unwrap makes errors.Is find ErrOutsideRoot when the path leaves the root.
func (e *UnsafePathError) Unwrap() error {
	if e.Outside {
		return ErrOutsideRoot
	}
	return nil
}

func outsideErr(p, format string, a ...any) error {
	return &UnsafePathError{Path: p, Why: fmt.Sprintf(format, a...) + ", which " + ErrOutsideRoot.Error(), Outside: true}
}

// LinkFS is what Resolve reads: an *os.Root, a Writable, or a test's
// wrapper around one.
type LinkFS interface {
	Lstat(name string) (fs.FileInfo, error)
	Readlink(name string) (string, error)
}

// Resolve resolves the host path p (absolute, or relative to the root)
// inside fsys the way the kernel resolves it for a process chrooted at the
// root: an absolute symlink starts again at the root (so /opt -> /var/opt
// inside a mounted host leads to the host's /var/opt, never to this
// machine's), and ".." in a symlink's target goes up a directory. It is
// the one resolver every write of berth goes through. It refuses, with an
// *UnsafePathError:
//
//   - p with a ".." component (a path berth writes is named plainly; a
//     ".." after a symlink means something else to the kernel than to a
//     reader of the path);
//   - a symlink whose target climbs above the root (the kernel would stop
//     at the root, but such a link in a host tree is an escape attempt or
//     a tree copied from elsewhere, and os.Root refuses it too);
//   - a symlink whose target does not exist (a dangling link: writing
//     through it would create a path the user never named, and mkdir -p
//     through it fails on the host as well);
//   - something other than a directory on the way, and more than 40 links.
//
// It returns p's resolved path relative to the root, slash-separated ("."
// for the root itself), free of symlinks as far as it exists, and whether
// p exists. It reads only (Lstat and Readlink).
func Resolve(fsys LinkFS, p string) (rel string, exists bool, err error) {
	p = filepath.ToSlash(p)
	if p == "" {
		return "", false, &UnsafePathError{Path: p, Why: "expected a path"}
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", false, &UnsafePathError{Path: p, Why: `it has a ".." component: name the directory without ".." (it could climb out of the host root)`, Outside: true}
		}
	}
	shown := p
	if !path.IsAbs(shown) {
		shown = "/" + shown
	}
	var done []string // resolved components, each an existing directory
	todo := splitPath(p)
	links := 0
	// While len(todo) >= tail, the components being resolved come from a
	// symlink's target (-1: none): that of link, which points to target.
	tail := -1
	var link, target string
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", false, outsideErr(shown, "a symlink on the way climbs above the root")
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(append([]string{}, done...), c)...)
		fi, err := fsys.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			if tail >= 0 && len(todo) >= tail {
				leads := ""
				if "/"+cur != path.Clean(target) {
					leads = fmt.Sprintf(" (/%s is missing)", cur)
				}
				return "", false, &UnsafePathError{Path: shown, Why: fmt.Sprintf("%s is a symlink to %s, which does not exist inside the host root, where the host resolves the link%s", link, target, leads)}
			}
			// Missing from here on: what remains is created as named.
			rest := append([]string{c}, todo...)
			for _, r := range rest {
				if r == ".." {
					return "", false, &UnsafePathError{Path: shown, Why: "a symlink on the way names a missing directory followed by \"..\""}
				}
			}
			for _, r := range rest {
				if r != "" && r != "." {
					done = append(done, r)
				}
			}
			return path.Join(append([]string{"."}, done...)...), false, nil
		}
		if err != nil {
			return "", false, &UnsafePathError{Path: shown, Why: fmt.Sprintf("cannot resolve /%s: %v", cur, err)}
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			links++
			if links > maxLinks {
				return "", false, &UnsafePathError{Path: shown, Why: "too many levels of symlinks"}
			}
			t, err := fsys.Readlink(cur)
			if err != nil {
				return "", false, &UnsafePathError{Path: shown, Why: fmt.Sprintf("reading link /%s: %v", cur, err)}
			}
			if t == "" {
				return "", false, &UnsafePathError{Path: shown, Why: fmt.Sprintf("/%s is an empty symlink", cur)}
			}
			if path.IsAbs(t) {
				done = done[:0]
			} else if climbs(done, t) {
				return "", false, outsideErr(shown, "/%s is a symlink to %s", cur, t)
			}
			if tail < 0 || len(todo) < tail {
				tail, link, target = len(todo), "/"+cur, t
			}
			todo = append(splitPath(t), todo...)
		case fi.IsDir():
			done = append(done, c)
		case len(todo) == 0:
			// The last component: a file (what a write replaces).
			done = append(done, c)
		default:
			return "", false, &UnsafePathError{Path: shown, Why: fmt.Sprintf("/%s is not a directory (%s)", cur, TypeName(fi.Mode()))}
		}
	}
	return path.Join(append([]string{"."}, done...)...), true, nil
}

// splitPath splits p into components. A trailing "/" (p names a
// directory) becomes a last "." component, so that a file there is "not a
// directory", as the kernel has it.
func splitPath(p string) []string {
	c := strings.Split(strings.Trim(p, "/"), "/")
	if strings.HasSuffix(p, "/") && c[0] != "" {
		c = append(c, ".")
	}
	return c
}

// climbs reports whether relative link target t, read in directory dir
// (resolved components), goes above the root.
func climbs(dir []string, t string) bool {
	depth := len(dir)
	for _, c := range splitPath(t) {
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// TypeName names a file's type for messages ("FIFO", "character
// device", "symlink").
func TypeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return kindOf(fileFormat(m))
}

// WFile is an open file being written.
type WFile interface {
	io.Writer
	Sync() error
	Close() error
}

// WriteFS is what WriteSynced and WriteAtomic write through: a Writable,
// an *os.Root (RootFS), or a test's wrapper injecting a full disk.
type WriteFS interface {
	OpenFile(name string, flag int, perm fs.FileMode) (WFile, error)
	Rename(oldname, newname string) error
	Remove(name string) error
}

// RootFS is r as a WriteFS.
func RootFS(r *os.Root) WriteFS { return rootFS{r} }

type rootFS struct{ r *os.Root }

func (f rootFS) OpenFile(name string, flag int, perm fs.FileMode) (WFile, error) {
	return f.r.OpenFile(name, flag, perm)
}
func (f rootFS) Rename(oldname, newname string) error { return f.r.Rename(oldname, newname) }
func (f rootFS) Remove(name string) error             { return f.r.Remove(name) }

// TempName is a temporary name beside name, unique per process and
// attempt: berth's lock serialises its own runs, but a name shared between
// runs is what an interrupted one leaves behind for the next to trip over.
// Every temporary file berth writes is named so (.berth-*.tmp).
func TempName(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return path.Join(path.Dir(name), fmt.Sprintf(".berth-%s.%d-%s.tmp", path.Base(name), os.Getpid(), hex.EncodeToString(b[:])))
}

// WriteSynced creates name, which must not exist (O_EXCL, and O_NOFOLLOW:
// a link planted there is never written through), writes data and syncs
// it: the first half of an atomic replacement, whose rename the caller
// does (WriteAtomic, or configure's commit of several files at once). A
// failure removes what it created.
func WriteSynced(fsys WriteFS, name string, data []byte, mode fs.FileMode) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fsys.Remove(name)
	}
	return err
}

// WriteAtomic replaces name with data the way containerd's pkg/atomicfile
// does: a synced temporary file in the same directory, renamed over name,
// then the directory synced. A reader sees the old file or the new one,
// never half of one, and a symlink at name is replaced, not written
// through. The directory must exist. Its errors name the files (an
// *fs.PathError or *os.LinkError); callers say what was being written.
func WriteAtomic(fsys WriteFS, name string, data []byte, mode fs.FileMode) error {
	tmp := TempName(name)
	if err := WriteSynced(fsys, tmp, data, mode); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, name); err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	SyncDir(fsys, path.Dir(name))
	return nil
}

// SyncDir makes a rename in dir durable. Failing to sync a directory is
// not worth failing an otherwise complete change for.
func SyncDir(fsys WriteFS, dir string) {
	if f, err := fsys.OpenFile(dir, os.O_RDONLY, 0); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}

// errEmptyRoot is the error of both doors (Open, OpenWritable) for "".
var errEmptyRoot = errors.New("host root: an empty path (name / for this machine's root)")

// Writable is a host root opened for writing: the one door through which
// berth changes a host (apply, remove, install, uninstall, the
// node-installer, the download cache inside the root). It is an os.Root,
// so no path, symlink or ".." reaches outside the directory; paths the
// host names are resolved with Resolve, as a chroot would. It is opened
// once per command, next to the read root (Open), from the same --root.
// Names are slash-separated and relative to the root.
type Writable struct{ r *os.Root }

// OpenWritable opens the host root directory dir for writing. A snapshot
// archive, or anything else that is not a directory, is refused: its files
// are a copy, and writing them would configure no node. "" is refused too
// (an unset variable in a script must not mean this machine's /).
func OpenWritable(dir string) (*Writable, error) {
	if dir == "" {
		return nil, errEmptyRoot
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("opening host root %s: %w", dir, err)
	}
	if !fi.IsDir() {
		if fi.Mode().IsRegular() {
			return nil, fmt.Errorf("host root %s: writing needs a directory (a snapshot cannot be written)", dir)
		}
		return nil, fmt.Errorf("host root %s: writing needs a directory, not a %s", dir, TypeName(fi.Mode()))
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening host root %s: %w", dir, err)
	}
	return &Writable{r: r}, nil
}

// Close releases the root.
func (w *Writable) Close() error { return w.r.Close() }

// Name is the directory the root was opened at, on this machine.
func (w *Writable) Name() string { return w.r.Name() }

// Open opens name for reading without a size or type check: a directory,
// to list, sync or statfs it.
func (w *Writable) Open(name string) (*os.File, error) { return w.r.Open(name) }

// Path is name's path on this machine, for messages.
func (w *Writable) Path(name string) string {
	return filepath.Join(w.r.Name(), filepath.FromSlash(name))
}

// Resolve is Resolve in this root.
func (w *Writable) Resolve(p string) (rel string, exists bool, err error) { return Resolve(w.r, p) }

// OpenRoot opens directory rel (resolved, relative to the root) as an
// os.Root of its own: an installation prefix or a download cache, written
// below without leaving it.
func (w *Writable) OpenRoot(rel string) (*os.Root, error) { return w.r.OpenRoot(rel) }

// Lstat describes name without following a final symlink.
func (w *Writable) Lstat(name string) (fs.FileInfo, error) { return w.r.Lstat(name) }

// Readlink returns a symlink's target as the host has it.
func (w *Writable) Readlink(name string) (string, error) { return w.r.Readlink(name) }

// MkdirAll creates name and its missing parents.
func (w *Writable) MkdirAll(name string, perm fs.FileMode) error { return w.r.MkdirAll(name, perm) }

// Rename renames oldname to newname.
func (w *Writable) Rename(oldname, newname string) error { return w.r.Rename(oldname, newname) }

// Remove removes a file or an empty directory.
func (w *Writable) Remove(name string) error { return w.r.Remove(name) }

// ReadDir lists a directory.
func (w *Writable) ReadDir(name string) ([]fs.DirEntry, error) { return fs.ReadDir(w.r.FS(), name) }

// OpenFile opens name for writing (or a directory, to sync it).
func (w *Writable) OpenFile(name string, flag int, perm fs.FileMode) (WFile, error) {
	return w.r.OpenFile(name, flag, perm)
}

// ReadFile reads a regular file of at most DefaultMaxFile bytes
// (ReadFileMax).
func (w *Writable) ReadFile(name string) ([]byte, error) {
	return w.ReadFileMax(name, DefaultMaxFile)
}

// ReadFileMax reads name, resolved as the host would (Resolve), if it is a
// regular file of at most max bytes. Anything else is refused by name
// before it is opened: a FIFO never blocks, a device is never read (a
// *NotRegularError); a larger file is a *TooLargeError, refused from its
// size. The file is opened non-blocking and without following a link, and
// checked again once open, so that one swapped in meanwhile is refused too.
func (w *Writable) ReadFileMax(name string, max int64) ([]byte, error) {
	rel, exists, err := w.Resolve(name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	fi, err := w.r.Lstat(rel)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: &NotRegularError{Kind: TypeName(fi.Mode())}}
	}
	if fi.Size() > max {
		return nil, &fs.PathError{Op: "read", Path: name, Err: &TooLargeError{Limit: max}}
	}
	f, err := w.r.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ofi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !ofi.Mode().IsRegular() || !os.SameFile(fi, ofi) {
		return nil, &fs.PathError{Op: "read", Path: name, Err: &NotRegularError{Kind: TypeName(ofi.Mode())}}
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if int64(len(data)) > max {
		return nil, &fs.PathError{Op: "read", Path: name, Err: &TooLargeError{Limit: max}}
	}
	return data, nil
}

// Lock takes the root's exclusive lock: flock on the root directory
// itself, waiting for it. Every berth process that changes runtime
// configuration or state on a host takes it (the CLI, the installer, the
// node agent through /host, which is the same inode as the host's /). The
// root directory is used rather than a lock file under the state
// directory because berth removes that directory with the last thing it
// owns: a lock file removed while another process waits on it, or
// recreated beside it, lets two processes hold "the" lock at once.
func (w *Writable) Lock() (unlock func(), err error) {
	f, err := w.r.Open(".")
	if err != nil {
		return nil, fmt.Errorf("opening host root %s to lock it: %w", w.r.Name(), err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("locking host root %s: %w", w.r.Name(), err)
	}
	return func() { f.Close() }, nil
}
