package hostfs

import (
	"io/fs"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// DirOpener is implemented by the FS of directory, snapshot and live
// roots: it holds a directory of the root open, so that the files in it
// are reached with one lookup from the directory instead of the whole
// path resolved from the root again. PCI discovery reads three to five
// files of each function's directory, thousands of functions on a big
// host, and the walk of sys/bus/pci/devices/<address>/ through its
// symlink was much of each read's cost.
type DirOpener interface {
	// OpenDirHandle resolves dir inside the root as any path is and
	// holds it open. Callers fall back to the FS (with dir+"/"+name) when
	// it fails; OpenDirHandle (the function) does that for them.
	OpenDirHandle(dir string) (DirHandle, error)
}

// DirHandle reads the files of one directory of a root. Each method gives
// what the root's FS gives for the path dir+"/"+name: the same bytes, the
// same errors, naming that path. A name is one component ("uevent"); any
// other name (with "/", or "", ".", "..") is handed to the FS as
// dir+"/"+name, which reads a deeper file or refuses the name.
//
// A handle is for one goroutine at a time; Close it once, after its last
// use.
type DirHandle interface {
	// ReadFile is FS.ReadFile of dir/name.
	ReadFile(name string) ([]byte, error)
	// ReadFileLimit is ReadFileLimit of dir/name.
	ReadFileLimit(name string, limit int64) ([]byte, error)
	// ReadLink is FS.ReadLink of dir/name.
	ReadLink(name string) (string, error)
	// Close releases the directory.
	Close() error
}

// OpenDirHandle returns a handle of the directory dir of fsys: fsys's own
// when it is a DirOpener and dir opens, and otherwise one that reads
// dir+"/"+name through fsys (whose errors then say what is wrong with
// dir, as they would have without a handle). So a caller need not care
// whether the handle could be had: the results are the same.
func OpenDirHandle(fsys fs.FS, dir string) DirHandle {
	if o, ok := fsys.(DirOpener); ok {
		if h, err := o.OpenDirHandle(dir); err == nil {
			return h
		}
	}
	return pathDir{fsys: fsys, dir: dir}
}

// pathDir is the DirHandle of an FS that has none of its own (a recording
// wrapper, whose reads must all go through it), or of a directory that
// did not open.
type pathDir struct {
	fsys fs.FS
	dir  string
}

func (p pathDir) ReadFile(name string) ([]byte, error) {
	return fs.ReadFile(p.fsys, joinDir(p.dir, name))
}

func (p pathDir) ReadFileLimit(name string, limit int64) ([]byte, error) {
	return ReadFileLimit(p.fsys, joinDir(p.dir, name), limit)
}

func (p pathDir) ReadLink(name string) (string, error) {
	return fs.ReadLink(p.fsys, joinDir(p.dir, name))
}

func (pathDir) Close() error { return nil }

// joinDir is the root-relative path of name in dir: "a/b" + "/" + name,
// or name alone in the root itself (".").
func joinDir(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// oneComponent reports whether name is a single file name: no "/", not
// "", "." or "..", no NUL. Only such a name is looked up from a handle's
// directory; the lookup then cannot go anywhere but into that directory.
func oneComponent(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// confinedDir is the DirHandle of a confinedFS.
//
// The directory is resolved by c.open as every path is (openat2 with
// RESOLVE_IN_ROOT, or the walk), so it is inside the root; a file of it
// is then looked up by its single name with openat(O_PATH|O_NOFOLLOW),
// which is the step either resolver takes last, and which cannot leave
// the directory. What the general way would go on to do with that step's
// result it still does: a symlink is resolved by the general way
// (c.ReadFileLimit of the whole path, which follows it inside the root);
// anything else is checked with fstat and reopened by regularFrom, so a
// FIFO, socket or device is reported, never opened, and a file the
// snapshot's index marks reads as marked. The reads then are the general
// way's (readLimited with a fileReader), and so are their errors. An
// error of the lookup other than ENOENT (which names the same path and
// says the same as the general way) is left to the general way to say.
type confinedDir struct {
	c   *confinedFS
	dir string
	// fd is an O_PATH handle of the directory; -1 once closed.
	fd int
	// pseudo is the index in pseudoTops of the kernel pseudo file system
	// the directory is on when readPseudo's direct open applies to it
	// (see pseudoOf), -1 otherwise.
	pseudo int
}

// OpenDirHandle implements DirOpener.
func (c *confinedFS) OpenDirHandle(dir string) (DirHandle, error) {
	if !validPath(dir) {
		return nil, pathErr("open", dir, fs.ErrInvalid)
	}
	// O_DIRECTORY: openat2 fails on anything else without opening it.
	fd, err := c.open(dir, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return nil, pathErr("open", dir, err)
	}
	if c.walk {
		// The walk returns its O_PATH handle of the last component
		// whatever it is: insist on a directory here.
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			unix.Close(fd)
			if err == nil {
				err = unix.ENOTDIR
			}
			return nil, pathErr("open", dir, err)
		}
	}
	return &confinedDir{c: c, dir: dir, fd: fd, pseudo: c.pseudoOf(dir, fd)}, nil
}

// pseudoOf is the index in pseudoTops of the kernel pseudo file system the
// directory fd (the root's dir) is on, when its files may be opened
// directly as readPseudo opens them; -1 otherwise. It needs what
// readPseudo needs (the fast paths on, no snapshot index, the root's sys
// or proc anchored as that file system, and dir below it), and that fd
// itself is on that file system: fstatfs answers for the mount the
// directory is on, which no directory tree can fake. The open is then
// kept inside that mount (RESOLVE_NO_XDEV), which holds no FIFO or
// device, exactly as readPseudo's is.
func (c *confinedFS) pseudoOf(dir string, fd int) int {
	if c.walk || c.noPseudo || len(c.marked) > 0 {
		return -1
	}
	top, _, _ := strings.Cut(dir, "/")
	for i := range pseudoTops {
		if pseudoTops[i].name != top || c.pseudoAnchorFd(i) < 0 {
			continue
		}
		var st unix.Statfs_t
		if unix.Fstatfs(fd, &st) == nil && int64(st.Type) == pseudoTops[i].magic {
			return i
		}
	}
	return -1
}

// ReadFile implements DirHandle with the root's default cap.
func (d *confinedDir) ReadFile(name string) ([]byte, error) {
	return d.ReadFileLimit(name, d.c.maxFile)
}

// ReadFileLimit implements DirHandle.
func (d *confinedDir) ReadFileLimit(name string, limit int64) ([]byte, error) {
	// The whole path is made only where it is needed (errors, the
	// general way, regularFrom): a read is one allocation fewer.
	if !oneComponent(name) {
		return d.c.ReadFileLimit(joinDir(d.dir, name), limit)
	}
	if d.fd < 0 {
		return nil, pathErr("open", joinDir(d.dir, name), fs.ErrClosed)
	}
	if limit <= 0 {
		limit = d.c.maxFile
	}
	if d.pseudo >= 0 {
		// As readPseudo, and O_NOFOLLOW: a symlink (ELOOP) is followed
		// the general way, from the root.
		fd, err := openat2Retry(d.fd, name, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
		})
		switch {
		case err == nil:
			return d.c.readPseudoFd(fd, joinDir(d.dir, name), d.pseudo, limit)
		case err == unix.ENOENT:
			return nil, pathErr("open", joinDir(d.dir, name), err)
		}
		return d.c.ReadFileLimit(joinDir(d.dir, name), limit)
	}
	fd, err := openatRetry(d.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	switch {
	case err == unix.ENOENT:
		return nil, pathErr("open", joinDir(d.dir, name), err)
	case err != nil:
		return d.c.ReadFileLimit(joinDir(d.dir, name), limit)
	}
	fi := &fileInfo{name: name}
	if err := syscall.Fstat(fd, &fi.st); err != nil || fi.format() == syscall.S_IFLNK {
		unix.Close(fd)
		return d.c.ReadFileLimit(joinDir(d.dir, name), limit)
	}
	full := joinDir(d.dir, name)
	nfd, err := d.c.regularFrom(fd, fi, full)
	unix.Close(fd)
	if err != nil {
		return nil, err
	}
	defer unix.Close(nfd)
	return readLimited(&fileReader{fd: nfd, size: fi.Size()}, full, fi.Size(), limit)
}

// ReadLink implements DirHandle: readlinkat of the name in the directory.
// Anything but a link's text or ENOENT (a file that is not a link, EINVAL)
// is said by the general way, which stats the file to say it.
func (d *confinedDir) ReadLink(name string) (string, error) {
	if !oneComponent(name) {
		return d.c.ReadLink(joinDir(d.dir, name))
	}
	if d.fd < 0 {
		return "", pathErr("readlink", joinDir(d.dir, name), fs.ErrClosed)
	}
	t, err := readlinkAt(d.fd, name)
	switch {
	case err == nil:
		return t, nil
	case err == unix.ENOENT:
		return "", pathErr("readlink", joinDir(d.dir, name), err)
	}
	return d.c.ReadLink(joinDir(d.dir, name))
}

// Close implements DirHandle.
func (d *confinedDir) Close() error {
	if d.fd < 0 {
		return pathErr("close", d.dir, fs.ErrClosed)
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return pathErr("close", d.dir, err)
}
