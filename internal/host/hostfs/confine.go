package hostfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultMaxFile caps every read of a file whose source declares no cap
// of its own (ReadFileLimit): a host file is a few kilobytes, pci.ids a
// megabyte or two.
const DefaultMaxFile int64 = 16 << 20

// maxDirEntries caps one directory listing.
const maxDirEntries = 100_000

// Errors of the confined file-system layer. They come wrapped in an
// *fs.PathError naming the path relative to the root; test with errors.Is.
var (
	// ErrNotRegular: a FIFO, socket or device where a file is expected.
	// The wrapped *NotRegularError says which.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file holds more than the cap of the read (a
	// *TooLargeError).
	ErrTooLarge = errors.New("file too large")
	// ErrTruncated: the snapshot holds only part of the file (a
	// *TruncatedError).
	ErrTruncated = errors.New("truncated in snapshot")
)

// NotRegularError is the error of a read of something other than a
// regular file (or a directory).
type NotRegularError struct {
	// Kind is "FIFO", "socket", "character device", "block device" or
	// "symlink".
	Kind string
}

func (e *NotRegularError) Error() string { return "not a regular file: " + e.Kind }

// Is makes errors.Is(err, ErrNotRegular) true.
func (e *NotRegularError) Is(target error) bool { return target == ErrNotRegular }

// TooLargeError is the error of a read of a file larger than its cap.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string { return fmt.Sprintf("larger than %d bytes", e.Limit) }

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// TruncatedError is the error of a read of a file that the snapshot
// stores cut short (its index lists it as truncated).
type TruncatedError struct {
	// Kept is what the snapshot holds; Size what the host had, 0 when
	// unknown.
	Kept, Size int64
}

func (e *TruncatedError) Error() string {
	if e.Size > 0 {
		return fmt.Sprintf("truncated in snapshot (%d of %d bytes kept)", e.Kept, e.Size)
	}
	return fmt.Sprintf("truncated in snapshot (%d bytes kept)", e.Kept)
}

// Is makes errors.Is(err, ErrTruncated) true.
func (e *TruncatedError) Is(target error) bool { return target == ErrTruncated }

// confinedFS serves a directory on the machine berth runs on as a host
// root, with the semantics of a chroot into it: every path is resolved
// inside the root, absolute symlinks are taken relative to the root and
// ".." stops at the root. Nothing outside can be reached, by any path.
//
// Resolution uses openat2(2) with RESOLVE_IN_ROOT where the kernel has it
// (Linux 5.6), and otherwise walks the path one component at a time with
// openat(O_PATH|O_NOFOLLOW), following symlinks itself and keeping the
// directories it went through, so that ".." is a step back in that list
// and never a lookup of "..". Only regular files are ever opened for
// reading, and only after the resolved handle (O_PATH, which opens
// nothing) was checked with fstat: a FIFO, socket or device is reported,
// never opened. Directories are opened with O_DIRECTORY, which opens
// nothing else.
type confinedFS struct {
	// root is an O_PATH handle of the root directory.
	root *os.File
	// walk resolves in userspace instead of with openat2.
	walk bool
	// noProc reopens a checked file by resolving it again (and checking
	// it is still the same file) instead of through /proc/self/fd.
	noProc bool
	// maxFile caps ReadFile and reads through Open.
	maxFile int64
	// marked maps files (device, inode) of a snapshot that its index
	// says are not what the host had: truncated, or a FIFO, socket or
	// device stored as an empty file. Reading them returns the error.
	marked map[fileID]error
	// noPseudo turns the kernel pseudo-file-system reads off (tests).
	noPseudo bool
	// pseudo holds the sys and proc directories of the root when they
	// are the kernel's sysfs and procfs (see readPseudo).
	pseudo [len(pseudoTops)]pseudoAnchor
	// pages are *[sysfsPage]byte that readPseudo reads into.
	pages sync.Pool
	// dirents are *[direntBuf]byte that readDirFd reads into: one per
	// call would be fresh memory each time (a page fault per 4 KiB
	// written, in a process that never collects).
	dirents sync.Pool
}

// pseudoTops are the top directories of a root that a live host mounts
// kernel pseudo file systems on, with the magic of each.
var pseudoTops = [...]struct {
	name  string
	magic int64
}{
	{"sys", unix.SYSFS_MAGIC},
	{"proc", unix.PROC_SUPER_MAGIC},
}

// pseudoAnchor is a directory handle of one of pseudoTops, opened on
// first use; fd is -1 when the directory is not that pseudo file system.
type pseudoAnchor struct {
	once sync.Once
	fd   int
}

type fileID struct{ dev, ino uint64 }

// confineOptions force the fallbacks a machine without openat2 or procfs
// needs (in addition to those this machine needs), so that tests exercise
// them everywhere; the exported constructors use none.
type confineOptions struct {
	walk     bool
	noProc   bool
	noPseudo bool
}

// haveOpenat2 reports whether openat2 with RESOLVE_IN_ROOT works here (not
// before Linux 5.6, and seccomp profiles may refuse it).
var haveOpenat2 = sync.OnceValue(func() bool {
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
})

// procSelfFd is an O_PATH handle of /proc/self/fd (the process's, whose
// descriptor table every thread shares), through which a checked O_PATH
// handle is reopened without resolving its path again; -1 when there is
// no procfs there.
var procSelfFd = sync.OnceValue(func() int {
	fd, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil || st.Type != unix.PROC_SUPER_MAGIC {
		unix.Close(fd)
		return -1
	}
	return fd
})

// newConfinedFS opens dir (followed if it is itself a symlink: the user
// named it) as a confined root.
func newConfinedFS(dir string, opt confineOptions) (*confinedFS, error) {
	f, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return &confinedFS{
		root:     f,
		walk:     opt.walk || !haveOpenat2(),
		noProc:   opt.noProc || procSelfFd() < 0,
		noPseudo: opt.noPseudo,
		maxFile:  DefaultMaxFile,
	}, nil
}

// close releases the root handle and the pseudo file-system anchors.
func (c *confinedFS) close() error {
	for i := range c.pseudo {
		a := &c.pseudo[i]
		// Mark the anchor used, so that a late read cannot open it again.
		a.once.Do(func() { a.fd = -1 })
		if a.fd >= 0 {
			unix.Close(a.fd)
			a.fd = -1
		}
	}
	return c.root.Close()
}

// resolver names the mechanism in use, for tests and logs.
func (c *confinedFS) resolver() string {
	r := "openat2"
	if c.walk {
		r = "walk"
	}
	if c.noProc {
		r += "+reresolve"
	}
	return r
}

// open resolves name inside the root and opens it with flags: O_PATH
// (which opens nothing) or O_RDONLY|O_DIRECTORY, or, on reopening a file
// already checked, O_RDONLY. A final symlink is followed unless flags
// holds O_NOFOLLOW.
func (c *confinedFS) open(name string, flags int) (int, error) {
	rootfd := int(c.root.Fd())
	defer runtime.KeepAlive(c.root)
	if c.walk {
		return walkOpen(rootfd, name, flags)
	}
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	}
	for i := 0; ; i++ {
		fd, err := unix.Openat2(rootfd, name, &how)
		// EAGAIN: a rename or mount raced with a ".." lookup; the kernel
		// asks to try again.
		if err == unix.EINTR || (err == unix.EAGAIN && i < 64) {
			continue
		}
		return fd, err
	}
}

const (
	maxLinks = 40  // as the kernel (MAXSYMLINKS)
	maxDepth = 256 // directories kept open during a walk
)

// walkOpen is the userspace resolver: it opens each component of name
// below root with O_PATH|O_NOFOLLOW, follows symlinks itself (an absolute
// target restarts at root), and keeps the directories it went through in
// a list so that ".." goes back one entry, stopping at root. It never
// looks ".." up, so a directory moved out of the root meanwhile cannot
// lead outside. The final component is opened with flags|O_NOFOLLOW.
// Procfs magic links (whose text is not a path) fail with ELOOP, as
// openat2 with RESOLVE_NO_MAGICLINKS does.
func walkOpen(root int, name string, flags int) (int, error) {
	follow := flags&unix.O_NOFOLLOW == 0
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	var stack []int
	defer func() {
		for _, fd := range stack {
			unix.Close(fd)
		}
	}()
	cur := func() int {
		if len(stack) == 0 {
			return root
		}
		return stack[len(stack)-1]
	}
	todo := strings.Split(name, "/")
	links := 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			if n := len(stack); n > 0 {
				unix.Close(stack[n-1])
				stack = stack[:n-1]
			}
			continue
		}
		fd, err := openatRetry(cur(), part, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		last := onlyDots(todo)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if last && !follow {
				break
			}
			target, err := readlinkFd(fd)
			magic := err == nil && isMagicLink(fd, target)
			unix.Close(fd)
			switch {
			case err != nil:
				return -1, err
			case magic:
				return -1, unix.ELOOP
			case target == "":
				return -1, unix.ENOENT
			}
			if links++; links > maxLinks {
				return -1, unix.ELOOP
			}
			if strings.HasPrefix(target, "/") {
				for _, d := range stack {
					unix.Close(d)
				}
				stack = stack[:0]
			}
			todo = append(strings.Split(target, "/"), todo...)
			continue
		case unix.S_IFDIR:
			if len(todo) > 0 {
				if len(stack) >= maxDepth {
					unix.Close(fd)
					return -1, unix.ENAMETOOLONG
				}
				stack = append(stack, fd)
				continue
			}
		default:
			if !last {
				unix.Close(fd)
				return -1, unix.ENOTDIR
			}
		}
		if len(todo) > 0 {
			// A trailing "/" or "/." after a non-directory.
			unix.Close(fd)
			return -1, unix.ENOTDIR
		}
		if flags&unix.O_PATH != 0 {
			return fd, nil
		}
		// Open the component found for real; the caller checks that it
		// is still the file the O_PATH handle saw.
		unix.Close(fd)
		return openatRetry(cur(), part, flags)
	}
	// The path ended on a directory reached by ".", "..", or a symlink
	// whose target ends so.
	return openatRetry(cur(), ".", flags&^unix.O_NOFOLLOW)
}

// onlyDots reports whether the remaining components name no further
// file ("", ".").
func onlyDots(todo []string) bool {
	for _, p := range todo {
		if p != "" && p != "." {
			return false
		}
	}
	return true
}

// openat2Retry is openat2 of name below dir, tried again when
// interrupted, or when the kernel asks to (EAGAIN: a rename or mount
// raced with a ".." lookup).
func openat2Retry(dir int, name string, how *unix.OpenHow) (int, error) {
	for n := 0; ; n++ {
		fd, err := unix.Openat2(dir, name, how)
		if err == unix.EINTR || (err == unix.EAGAIN && n < 64) {
			continue
		}
		return fd, err
	}
}

func openatRetry(dir int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dir, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// readlinkFd returns the target of the symlink an O_PATH|O_NOFOLLOW
// handle refers to (readlinkat with an empty path, Linux 2.6.39).
func readlinkFd(fd int) (string, error) { return readlinkAt(fd, "") }

// readlinkAt returns the target of the symlink name in the directory fd
// (a single component, never followed), or of fd itself when name is "".
func readlinkAt(fd int, name string) (string, error) {
	// The first try reads into an array on the stack: PCI discovery reads
	// two links per function, and sysfs links are short.
	var first [256]byte
	for size := len(first); ; size *= 2 {
		buf := first[:]
		if size > len(first) {
			buf = make([]byte, size)
		}
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
		if size >= 1<<16 {
			return "", unix.ENAMETOOLONG
		}
	}
}

// isMagicLink reports whether the symlink fd with text target is a procfs
// magic link (/proc/PID/root, fd/N, exe): one whose text is an absolute
// path or an object name ("pipe:[42]"), unlike proc/self or proc/mounts.
func isMagicLink(fd int, target string) bool {
	if !strings.HasPrefix(target, "/") && !strings.Contains(target, ":") {
		return false
	}
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
}

// fileInfo is an fs.FileInfo from fstat; Sys is *syscall.Stat_t, as for
// os.Stat.
type fileInfo struct {
	name string
	st   syscall.Stat_t
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.st.Size }
func (fi *fileInfo) Mode() fs.FileMode  { return modeOf(fi.st.Mode) }
func (fi *fileInfo) ModTime() time.Time { return time.Unix(fi.st.Mtim.Unix()) }
func (fi *fileInfo) IsDir() bool        { return fi.st.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func (fi *fileInfo) Sys() any           { return &fi.st }
func (fi *fileInfo) id() fileID         { return fileID{uint64(fi.st.Dev), fi.st.Ino} }
func (fi *fileInfo) format() uint32     { return fi.st.Mode & syscall.S_IFMT }

// modeOf converts st_mode as os.Stat does.
func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// kindOf names a file type for NotRegularError.
func kindOf(format uint32) string {
	switch format {
	case syscall.S_IFIFO:
		return "FIFO"
	case syscall.S_IFSOCK:
		return "socket"
	case syscall.S_IFCHR:
		return "character device"
	case syscall.S_IFBLK:
		return "block device"
	case syscall.S_IFLNK:
		return "symlink"
	case syscall.S_IFDIR:
		return "directory"
	}
	return fmt.Sprintf("file type %#o", format)
}

func fstatInfo(fd int, name string) (*fileInfo, error) {
	fi := &fileInfo{name: path.Base(name)}
	if err := syscall.Fstat(fd, &fi.st); err != nil {
		return nil, err
	}
	return fi, nil
}

// pathErr wraps err as the io/fs functions do.
func pathErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// validPath accepts the names of io/fs (relative, slash-separated, no
// "." or ".." elements) without NUL, which no file name holds.
func validPath(name string) bool {
	return fs.ValidPath(name) && !strings.ContainsRune(name, 0)
}

// lookup resolves name to an O_PATH handle (following a final symlink when
// follow is set) and stats it.
func (c *confinedFS) lookup(op, name string, follow bool) (int, *fileInfo, error) {
	if !validPath(name) {
		return -1, nil, pathErr(op, name, fs.ErrInvalid)
	}
	flags := unix.O_PATH
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := c.open(name, flags)
	if err != nil {
		return -1, nil, pathErr(op, name, err)
	}
	fi, err := fstatInfo(fd, name)
	if err != nil {
		unix.Close(fd)
		return -1, nil, pathErr(op, name, err)
	}
	return fd, fi, nil
}

// Stat implements fs.StatFS: anything may be stat'ed (device nodes too);
// nothing is opened.
func (c *confinedFS) Stat(name string) (fs.FileInfo, error) {
	fd, fi, err := c.lookup("stat", name, true)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	return fi, nil
}

// Lstat implements fs.ReadLinkFS.
func (c *confinedFS) Lstat(name string) (fs.FileInfo, error) {
	fd, fi, err := c.lookup("lstat", name, false)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	return fi, nil
}

// ReadLink implements fs.ReadLinkFS: the link's text as the host has it
// (resolving it is the caller's business, inside the root).
func (c *confinedFS) ReadLink(name string) (string, error) {
	if !validPath(name) {
		return "", pathErr("readlink", name, fs.ErrInvalid)
	}
	fd, err := c.open(name, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	defer unix.Close(fd)
	// readlinkat on the handle answers for a symlink at once (PCI
	// discovery reads two links per function); only what is not one is
	// stat'ed, to say what it is.
	if t, err := readlinkFd(fd); err == nil {
		return t, nil
	}
	fi, err := fstatInfo(fd, name)
	if err != nil {
		return "", pathErr("readlink", name, err)
	}
	if fi.format() != syscall.S_IFLNK {
		return "", pathErr("readlink", name, syscall.EINVAL)
	}
	t, err := readlinkFd(fd)
	return t, pathErr("readlink", name, err)
}

// openRegular resolves name, checks that it is a regular file (and not
// marked in the snapshot's index), and opens it for reading. A directory
// is EISDIR, as a read of one would be; anything else is a
// *NotRegularError, and is never opened.
func (c *confinedFS) openRegular(name string) (*os.File, *fileInfo, error) {
	fd, fi, err := c.openRegularFd(name)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fd), name), fi, nil
}

// openRegularFd is openRegular returning the raw descriptor.
func (c *confinedFS) openRegularFd(name string) (int, *fileInfo, error) {
	fd, fi, err := c.lookup("open", name, true)
	if err != nil {
		return -1, nil, err
	}
	defer unix.Close(fd)
	nfd, err := c.regularFrom(fd, fi, name)
	if err != nil {
		return -1, nil, err
	}
	return nfd, fi, nil
}

// regularFrom opens the regular file that the O_PATH handle fd (stat'ed
// as fi) refers to, or says why not. The descriptor is blocking (a
// regular file never blocks, and os.File must not try to poll it).
func (c *confinedFS) regularFrom(fd int, fi *fileInfo, name string) (int, error) {
	switch fi.format() {
	case syscall.S_IFREG:
	case syscall.S_IFDIR:
		return -1, pathErr("read", name, syscall.EISDIR)
	default:
		return -1, pathErr("open", name, &NotRegularError{Kind: kindOf(fi.format())})
	}
	if err := c.marked[fi.id()]; err != nil {
		return -1, pathErr("read", name, err)
	}
	nfd, err := c.reopen(fd, name, fi, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return -1, err
	}
	if c.noProc {
		if err := unix.SetNonblock(nfd, false); err != nil {
			unix.Close(nfd)
			return -1, pathErr("open", name, err)
		}
	}
	return nfd, nil
}

// reopen opens the file the checked O_PATH handle fd refers to with flags:
// through /proc/self/fd (the same inode, whatever happened to the path
// since), or, without procfs, by resolving name again non-blocking and
// insisting on the same device and inode (O_NONBLOCK is then left set).
func (c *confinedFS) reopen(fd int, name string, fi *fileInfo, flags int) (int, error) {
	if !c.noProc {
		nfd, err := openatRetry(procSelfFd(), strconv.Itoa(fd), flags|unix.O_CLOEXEC)
		return nfd, pathErr("open", name, err)
	}
	nfd, err := c.open(name, flags|unix.O_NONBLOCK)
	if err != nil {
		return -1, pathErr("open", name, err)
	}
	now, err := fstatInfo(nfd, name)
	if err == nil && (now.id() != fi.id() || now.format() != fi.format()) {
		err = errors.New("changed while it was being opened")
	}
	if err != nil {
		unix.Close(nfd)
		return -1, pathErr("open", name, err)
	}
	return nfd, nil
}

// ReadFile implements fs.ReadFileFS with the root's default cap.
func (c *confinedFS) ReadFile(name string) ([]byte, error) {
	return c.ReadFileLimit(name, c.maxFile)
}

// ReadFileLimit reads a regular file of at most limit bytes; a larger one
// is a *TooLargeError. /proc and /sys files report a size of 0 or 4096
// whatever they hold, so the read itself is bounded, not only the size
// checked.
func (c *confinedFS) ReadFileLimit(name string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = c.maxFile
	}
	if b, ok, err := c.readPseudo(name, limit); ok {
		return b, err
	}
	fd, fi, err := c.openRegularFd(name)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return readLimited(&fileReader{fd: fd, size: fi.Size()}, name, fi.Size(), limit)
}

// pseudoAnchorFd returns the handle of the directory i of pseudoTops, or
// -1 when the root's directory of that name is not that pseudo file
// system (a fixture, a snapshot, a host without it mounted). It is
// resolved inside the root like any path, once per root.
func (c *confinedFS) pseudoAnchorFd(i int) int {
	a := &c.pseudo[i]
	a.once.Do(func() {
		a.fd = -1
		fd, err := c.open(pseudoTops[i].name, unix.O_PATH|unix.O_DIRECTORY)
		if err != nil {
			return
		}
		var st unix.Statfs_t
		if unix.Fstatfs(fd, &st) != nil || int64(st.Type) != pseudoTops[i].magic {
			unix.Close(fd)
			return
		}
		a.fd = fd
	})
	return a.fd
}

// readPseudo reads a file below the root's sys or proc when that is the
// kernel's sysfs or procfs, in four system calls instead of seven: most
// of discovery's reads are sysfs attributes of a few bytes.
//
// The file is opened for reading directly, without the O_PATH lookup and
// fstat that keep devices and FIFOs from being opened, because none can
// be reached: sysfs and procfs hold only directories, regular files and
// symlinks, and openat2 with RESOLVE_BENEATH|RESOLVE_NO_XDEV resolves
// below the anchor and inside its mount only (RESOLVE_NO_MAGICLINKS as
// everywhere). O_NONBLOCK keeps a proc file that waits for data (kmsg)
// from blocking. A path that would leave the mount (a file system mounted
// below, as cgroup2 on sys/fs/cgroup, or a symlink out) fails with EXDEV
// and is read the general way, so results are those of the general way.
// ok is false when the fast path does not apply.
func (c *confinedFS) readPseudo(name string, limit int64) (b []byte, ok bool, err error) {
	if c.walk || c.noPseudo || len(c.marked) > 0 || !validPath(name) {
		return nil, false, nil
	}
	top, rest, found := strings.Cut(name, "/")
	if !found || rest == "" {
		return nil, false, nil
	}
	i := -1
	for j := range pseudoTops {
		if pseudoTops[j].name == top {
			i = j
		}
	}
	if i < 0 {
		return nil, false, nil
	}
	anchor := c.pseudoAnchorFd(i)
	if anchor < 0 {
		return nil, false, nil
	}
	how := unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := openat2Retry(anchor, rest, &how)
	switch {
	case err == unix.EXDEV:
		return nil, false, nil
	case err != nil:
		return nil, true, pathErr("open", name, err)
	}
	b, err = c.readPseudoFd(fd, name, i, limit)
	return b, true, err
}

// readPseudoFd reads and closes fd, a file of the pseudo file system i of
// pseudoTops opened for reading, as readPseudo does; name is the path for
// errors.
func (c *confinedFS) readPseudoFd(fd int, name string, i int, limit int64) ([]byte, error) {
	defer unix.Close(fd)
	r := &fileReader{fd: fd, sysfs: pseudoTops[i].magic == unix.SYSFS_MAGIC}
	// One page first: a sysfs attribute is at most a page. The page is
	// reused from read to read and what was read copied out at its size:
	// a fresh page for each of a discovery's hundred-odd attributes of a
	// few bytes was most of its garbage, and a page fault each.
	page, _ := c.pages.Get().(*[sysfsPage]byte)
	if page == nil {
		page = new([sysfsPage]byte)
	}
	b, err := readLimitedBuf(r, name, page[:0:min(limit+1, sysfsPage)], limit)
	if cap(b) > 0 && &b[:1][0] == &page[0] {
		b = append(make([]byte, 0, len(b)), b...)
	}
	c.pages.Put(page)
	if errors.Is(err, syscall.EISDIR) {
		// As the general way says it (read, not open).
		return nil, pathErr("read", name, syscall.EISDIR)
	}
	return b, err
}

// sysfsPage is the read size below which sysfs answers a file whole.
const sysfsPage = 4096

// fileReader reads a file opened for reading, saving the read that would
// only return the end where the first read says it has read the whole
// file: it returned less than it asked for, and either the file is a
// sysfs attribute asked for at most a page (sysfs makes an attribute's
// text whole with one call of its show function and hands it out as one
// record; a binary attribute is read at most a page at a time), or the
// file's size as fstat gave it (a regular file of a disk or tmpfs; proc,
// sysfs and cgroup files give 0 or 4096 whatever they hold, and a read
// that stops at 4096 with room for more is not taken for the end unless
// it is sysfs).
type fileReader struct {
	fd    int
	size  int64 // from fstat; 0 when unknown
	sysfs bool
	reads int
	done  bool
}

func (r *fileReader) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	n, err := fdReader(r.fd).Read(p)
	r.reads++
	if err == nil && r.reads == 1 && n > 0 && n < len(p) &&
		((r.sysfs && len(p) <= sysfsPage) || (r.size > 0 && r.size != sysfsPage && int64(n) == r.size)) {
		r.done = true
	}
	return n, err
}

// fdReader reads a raw descriptor (what os.File would do, without its
// set-up).
type fdReader int

func (r fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), p)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// readLimited reads r to its end, failing once it has more than limit
// bytes; size is the size stat reported (a hint). A file with a size gets
// one byte more than it, room to see the end (fileReader needs no more to
// know it has read the whole file); one without (proc and cgroup files
// say 0) gets 512 bytes first, as os.ReadFile does. More slack was most
// of the memory PCI discovery allocates: a uevent of 250 bytes took 768.
func readLimited(r io.Reader, name string, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, pathErr("read", name, &TooLargeError{Limit: limit})
	}
	first := size + 1
	if size <= 0 {
		first = 512
	}
	return readLimitedCap(r, name, first, limit)
}

// readLimitedCap is readLimited starting with a buffer of first bytes.
func readLimitedCap(r io.Reader, name string, first, limit int64) ([]byte, error) {
	return readLimitedBuf(r, name, make([]byte, 0, min(limit+1, first)), limit)
}

// readLimitedBuf is readLimited reading into buf (empty, with room for at
// most limit+1 bytes) first; the result may share buf's array.
func readLimitedBuf(r io.Reader, name string, buf []byte, limit int64) ([]byte, error) {
	most := limit + 1
	for {
		if len(buf) == cap(buf) {
			nb := make([]byte, len(buf), min(most, 2*int64(cap(buf))))
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, pathErr("read", name, &TooLargeError{Limit: limit})
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Open implements fs.FS: a regular file, read through a cap of the root's
// default size, or a directory; anything else is refused unopened.
func (c *confinedFS) Open(name string) (fs.File, error) {
	fd, fi, err := c.lookup("open", name, true)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if fi.format() == syscall.S_IFDIR {
		dfd, err := openatRetry(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
		if err != nil {
			return nil, pathErr("open", name, err)
		}
		return &dirFile{c: c, name: name, fi: fi, fd: dfd}, nil
	}
	if fi.format() == syscall.S_IFREG && fi.Size() > c.maxFile {
		return nil, pathErr("open", name, &TooLargeError{Limit: c.maxFile})
	}
	nfd, err := c.regularFrom(fd, fi, name)
	if err != nil {
		return nil, err
	}
	return &regFile{f: os.NewFile(uintptr(nfd), name), fi: fi, limit: c.maxFile}, nil
}

// OpenRaw opens a regular file inside the root for reading without a
// size cap (discovery reads binaries with ReadAt and its own bounds).
func (c *confinedFS) OpenRaw(name string) (*os.File, error) {
	f, _, err := c.openRegular(name)
	return f, err
}

// openCharDevice opens a character device inside the root with flags
// (O_RDONLY|O_NONBLOCK for dev/kmsg, O_RDWR for dev/kvm) and returns the
// raw descriptor, which the caller closes; anything else is refused
// unopened.
func (c *confinedFS) openCharDevice(name string, flags int) (int, error) {
	fd, fi, err := c.lookup("open", name, true)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fd)
	if fi.format() != syscall.S_IFCHR {
		return -1, pathErr("open", name, fmt.Errorf("not a character device: %s", kindOf(fi.format())))
	}
	return c.reopen(fd, name, fi, flags|unix.O_NOCTTY)
}

// regFile is a regular file opened by Open: reads past the cap fail.
type regFile struct {
	f     *os.File
	fi    *fileInfo
	limit int64
	n     int64
}

func (r *regFile) Stat() (fs.FileInfo, error) { return r.fi, nil }
func (r *regFile) Close() error               { return r.f.Close() }

func (r *regFile) Read(p []byte) (int, error) {
	if r.n >= r.limit {
		var one [1]byte
		n, err := r.f.Read(one[:])
		if n > 0 {
			return 0, pathErr("read", r.f.Name(), &TooLargeError{Limit: r.limit})
		}
		return 0, err
	}
	if int64(len(p)) > r.limit-r.n {
		p = p[:r.limit-r.n]
	}
	n, err := r.f.Read(p)
	r.n += int64(n)
	return n, err
}

// dirFile is a directory opened by Open.
type dirFile struct {
	c    *confinedFS
	name string
	fi   *fileInfo
	fd   int
	ents []fs.DirEntry
	done bool
}

func (d *dirFile) Stat() (fs.FileInfo, error) { return d.fi, nil }

func (d *dirFile) Read([]byte) (int, error) {
	return 0, pathErr("read", d.name, syscall.EISDIR)
}

func (d *dirFile) Close() error {
	if d.fd < 0 {
		return pathErr("close", d.name, fs.ErrClosed)
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	if !d.done {
		if d.fd < 0 {
			return nil, pathErr("readdir", d.name, fs.ErrClosed)
		}
		ents, err := d.c.readDirFd(d.fd, d.name)
		if err != nil {
			return nil, err
		}
		d.ents, d.done = ents, true
	}
	if n <= 0 {
		ents := d.ents
		d.ents = nil
		return ents, nil
	}
	if len(d.ents) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(d.ents))
	ents := d.ents[:n]
	d.ents = d.ents[n:]
	return ents, nil
}

// ReadDir implements fs.ReadDirFS, entries sorted by name.
func (c *confinedFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if !validPath(name) {
		return nil, pathErr("open", name, fs.ErrInvalid)
	}
	// O_DIRECTORY fails on anything but a directory without opening it.
	fd, err := c.open(name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	defer unix.Close(fd)
	return c.readDirFd(fd, name)
}

// direntBuf is the size of readDirFd's getdents buffer.
const direntBuf = 16 << 10

// readDirFd lists the open directory fd with getdents64; the types come
// from the entries (or an fstat of the entry, not followed, when the file
// system does not give them).
func (c *confinedFS) readDirFd(fd int, name string) ([]fs.DirEntry, error) {
	// The entries are made in one slice and their names in one string,
	// and sorted as values: a PCI bus of thousands of functions was as
	// many allocations, and its sort, through the interface, a cache miss
	// per comparison.
	type entry struct {
		start, end int
		typ        fs.FileMode
	}
	var (
		es    []entry
		names []byte
	)
	bp, _ := c.dirents.Get().(*[direntBuf]byte)
	if bp == nil {
		bp = new([direntBuf]byte)
	}
	defer c.dirents.Put(bp)
	buf := bp[:]
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, pathErr("readdir", name, err)
		}
		if n <= 0 {
			break
		}
		for off := 0; off+19 <= n; {
			// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen == 0 || off+reclen > n {
				return nil, pathErr("readdir", name, errors.New("malformed directory entry"))
			}
			typ := buf[off+18]
			nm := buf[off+19 : off+reclen]
			if i := slices.Index(nm, 0); i >= 0 {
				nm = nm[:i]
			}
			off += reclen
			if len(nm) == 0 || string(nm) == "." || string(nm) == ".." {
				continue
			}
			if len(es) >= maxDirEntries {
				return nil, pathErr("readdir", name, fmt.Errorf("more than %d entries", maxDirEntries))
			}
			mode, ok := direntMode(typ)
			if !ok {
				mode = typeAt(fd, string(nm))
			}
			es = append(es, entry{start: len(names), end: len(names) + len(nm), typ: mode})
			names = append(names, nm...)
		}
	}
	if len(es) == 0 {
		return nil, nil
	}
	text := string(names)
	slices.SortFunc(es, func(a, b entry) int { return strings.Compare(text[a.start:a.end], text[b.start:b.end]) })
	des := make([]dirEntry, len(es))
	ents := make([]fs.DirEntry, len(es))
	for i, e := range es {
		des[i] = dirEntry{c: c, dir: name, name: text[e.start:e.end], typ: e.typ}
		ents[i] = &des[i]
	}
	return ents, nil
}

func direntMode(t uint8) (fs.FileMode, bool) {
	switch t {
	case unix.DT_REG:
		return 0, true
	case unix.DT_DIR:
		return fs.ModeDir, true
	case unix.DT_LNK:
		return fs.ModeSymlink, true
	case unix.DT_FIFO:
		return fs.ModeNamedPipe, true
	case unix.DT_SOCK:
		return fs.ModeSocket, true
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice, true
	case unix.DT_BLK:
		return fs.ModeDevice, true
	}
	return 0, false
}

// typeAt is the type of entry name of the directory fd, not followed.
func typeAt(dir int, name string) fs.FileMode {
	fd, err := openatRetry(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return fs.ModeIrregular
	}
	defer unix.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return fs.ModeIrregular
	}
	return modeOf(st.Mode).Type()
}

// dirEntry is one entry of a listing; Info stats it through the root.
type dirEntry struct {
	c    *confinedFS
	dir  string
	name string
	typ  fs.FileMode
}

func (e *dirEntry) Name() string               { return e.name }
func (e *dirEntry) IsDir() bool                { return e.typ.IsDir() }
func (e *dirEntry) Type() fs.FileMode          { return e.typ }
func (e *dirEntry) Info() (fs.FileInfo, error) { return e.c.Lstat(path.Join(e.dir, e.name)) }
func (e *dirEntry) String() string             { return fs.FormatDirEntry(e) }

// ReadFileLimit reads name from fsys, failing with a *TooLargeError (in an
// *fs.PathError) when the file holds more than limit bytes: how a
// discovery source declares a cap of its own. Host roots apply it without
// reading past the cap; any other fs.FS is read through Open.
func ReadFileLimit(fsys fs.FS, name string, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxFile
	}
	if l, ok := fsys.(interface {
		ReadFileLimit(string, int64) ([]byte, error)
	}); ok {
		return l.ReadFileLimit(name, limit)
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size int64
	if fi, err := f.Stat(); err == nil {
		if !fi.Mode().IsRegular() {
			if fi.IsDir() {
				return nil, pathErr("read", name, syscall.EISDIR)
			}
			return nil, pathErr("open", name, &NotRegularError{Kind: kindOf(uint32(fileFormat(fi.Mode())))})
		}
		size = fi.Size()
	}
	return readLimited(f, name, size, limit)
}

// fileFormat maps an fs.FileMode type back to S_IFMT bits for kindOf.
func fileFormat(m fs.FileMode) uint32 {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return syscall.S_IFIFO
	case m&fs.ModeSocket != 0:
		return syscall.S_IFSOCK
	case m&fs.ModeCharDevice != 0:
		return syscall.S_IFCHR
	case m&fs.ModeDevice != 0:
		return syscall.S_IFBLK
	case m&fs.ModeSymlink != 0:
		return syscall.S_IFLNK
	}
	return 0
}
