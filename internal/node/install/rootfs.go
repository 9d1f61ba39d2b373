package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/node/configure"
)

// ErrOutsideRoot marks a path that install, rollback or uninstall refuses
// to write because it resolves outside the host root (--root).
var ErrOutsideRoot = errors.New("resolves outside the host root")

// RefusedError is a path install, rollback or uninstall will not write or
// delete: it leaves the host root, or berth's entry there is not what
// berth made. It is returned before anything was changed. It matches
// configure.ErrRefused (the CLI exits 1 for it) and, when the path leaves
// the root, ErrOutsideRoot.
type RefusedError struct {
	// Path is the path refused, as the host names it (or on this machine).
	Path string
	// Why says what is wrong with it.
	Why string
	// Outside is set when the path resolves outside the host root.
	Outside bool
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("refusing %s: %s; nothing was changed", e.Path, e.Why)
}

// Unwrap makes errors.Is find configure.ErrRefused, and ErrOutsideRoot when
// the path leaves the root.
func (e *RefusedError) Unwrap() []error {
	if e.Outside {
		return []error{configure.ErrRefused, ErrOutsideRoot}
	}
	return []error{configure.ErrRefused}
}

func outside(p, format string, a ...any) error {
	return &RefusedError{Path: p, Why: fmt.Sprintf(format, a...) + ", which " + ErrOutsideRoot.Error(), Outside: true}
}

// maxLinks bounds the symlinks followed resolving one path, as the kernel
// does (ELOOP after 40).
const maxLinks = 40

// OpenHostRoot opens the host root directory dir ("" is this machine's /)
// as an os.Root, which every write of the installer goes through.
func OpenHostRoot(dir string) (*os.Root, error) {
	if dir == "" {
		dir = "/"
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("host root %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("host root %s: install, rollback and uninstall need a directory (a snapshot cannot be written)", dir)
	}
	return os.OpenRoot(dir)
}

// ResolveIn resolves the absolute host path p inside root the way the
// kernel resolves it for a process chrooted at root: an absolute symlink
// starts again at the root (so /opt -> /var/opt inside a mounted host
// leads to the host's /var/opt, never to this machine's), and ".." in a
// symlink's target goes up a directory. It refuses, with a *RefusedError:
//
//   - p with a ".." component (a path berth writes is named plainly; a
//     ".." after a symlink means something else to the kernel than to a
//     reader of the path);
//   - a symlink whose target climbs above the root (the kernel would stop
//     at the root, but such a link in a host tree is an escape attempt or
//     a tree copied from elsewhere, and os.Root refuses it too);
//   - a symlink whose target does not exist (mkdir -p through it fails on
//     the host as well: berth does not create the directories it names);
//   - something other than a directory on the way, and more than 40 links.
//
// It returns p's resolved path relative to root, slash-separated ("." for
// the root itself), free of symlinks as far as it exists, and whether p
// exists. It reads only (Lstat and Readlink through root).
func ResolveIn(root *os.Root, p string) (rel string, exists bool, err error) {
	p = filepath.ToSlash(p)
	if !path.IsAbs(p) {
		return "", false, &RefusedError{Path: p, Why: "expected an absolute path"}
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return "", false, &RefusedError{Path: p, Why: `it has a ".." component: name the directory without ".." (it could climb out of the host root)`, Outside: true}
		}
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
				return "", false, outside(p, "a symlink on the way climbs above the root")
			}
			done = done[:len(done)-1]
			continue
		}
		cur := path.Join(append(append([]string{}, done...), c)...)
		fi, err := root.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			if tail >= 0 && len(todo) >= tail {
				leads := ""
				if "/"+cur != path.Clean(target) {
					leads = fmt.Sprintf(" (/%s is missing)", cur)
				}
				return "", false, &RefusedError{Path: p, Why: fmt.Sprintf("%s is a symlink to %s, which does not exist inside the host root, where the host resolves the link%s", link, target, leads)}
			}
			// Missing from here on: what remains is created as named.
			rest := append([]string{c}, todo...)
			for _, r := range rest {
				if r == ".." {
					return "", false, &RefusedError{Path: p, Why: "a symlink on the way names a missing directory followed by \"..\""}
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
			return "", false, &RefusedError{Path: p, Why: fmt.Sprintf("cannot resolve /%s: %v", cur, err)}
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			links++
			if links > maxLinks {
				return "", false, &RefusedError{Path: p, Why: "too many levels of symlinks"}
			}
			t, err := root.Readlink(cur)
			if err != nil {
				return "", false, &RefusedError{Path: p, Why: fmt.Sprintf("reading link /%s: %v", cur, err)}
			}
			if t == "" {
				return "", false, &RefusedError{Path: p, Why: fmt.Sprintf("/%s is an empty symlink", cur)}
			}
			if path.IsAbs(t) {
				done = done[:0]
			} else if climbs(done, t) {
				return "", false, outside(p, "/%s is a symlink to %s", cur, t)
			}
			if tail < 0 || len(todo) < tail {
				tail, link, target = len(todo), "/"+cur, t
			}
			todo = append(splitPath(t), todo...)
		case fi.IsDir():
			done = append(done, c)
		default:
			return "", false, &RefusedError{Path: p, Why: fmt.Sprintf("/%s is not a directory (%s)", cur, fi.Mode().Type())}
		}
	}
	return path.Join(append([]string{"."}, done...)...), true, nil
}

func splitPath(p string) []string { return strings.Split(strings.Trim(p, "/"), "/") }

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

// deepestExisting returns the deepest existing directory of rel (resolved,
// relative to root): where a statfs of rel's future file system is taken.
func deepestExisting(root *os.Root, rel string) string {
	for d := rel; ; d = path.Dir(d) {
		if fi, err := root.Lstat(d); err == nil && fi.IsDir() {
			return d
		}
		if d == "." || d == "/" || d == "" {
			return "."
		}
	}
}

// checkDirChain checks that each existing component of rel (relative to
// dir, slash-separated) is a real directory, not a symlink: berth's own
// directories in the prefix are never symlinks, so one that became a
// symlink is not written through. The last component may be missing.
func checkDirChain(dir *os.Root, display, rel string) error {
	cur := ""
	for _, c := range splitPath(rel) {
		cur = path.Join(cur, c)
		fi, err := dir.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		p := filepath.Join(display, filepath.FromSlash(cur))
		if err != nil {
			return &RefusedError{Path: p, Why: err.Error()}
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			t, _ := dir.Readlink(cur)
			return &RefusedError{Path: p, Why: fmt.Sprintf("it is a symlink to %s, and berth never makes one there (move it away)", t)}
		}
		if !fi.IsDir() {
			return &RefusedError{Path: p, Why: fmt.Sprintf("it is a %s, not berth's directory (move it away)", typeName(fi.Mode()))}
		}
	}
	return nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return m.Type().String()
}
