package install

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
)

// RefusedError is a path install, rollback or uninstall will not write or
// delete: it leaves the host root, or berth's entry there is not what
// berth made. It is returned before anything was changed. It matches
// configure.ErrRefused (the CLI exits 1 for it) and, when the path leaves
// the root, hostfs.ErrOutsideRoot.
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

// Unwrap makes errors.Is find configure.ErrRefused, and
// hostfs.ErrOutsideRoot when the path leaves the root.
func (e *RefusedError) Unwrap() []error {
	if e.Outside {
		return []error{configure.ErrRefused, hostfs.ErrOutsideRoot}
	}
	return []error{configure.ErrRefused}
}

// ResolveIn resolves the absolute host path p of a directory inside the
// host root w with hostfs.Resolve (chroot semantics; see there for what it
// refuses), refusing also an existing p that is not a directory. A
// refusal is a *RefusedError. It returns p's resolved path relative to the
// root ("." for the root itself) and whether p exists.
func ResolveIn(w *hostfs.Writable, p string) (rel string, exists bool, err error) {
	if !path.IsAbs(filepath.ToSlash(p)) {
		return "", false, &RefusedError{Path: p, Why: "expected an absolute path"}
	}
	rel, exists, err = w.Resolve(p)
	if ue := (*hostfs.UnsafePathError)(nil); errors.As(err, &ue) {
		return "", false, &RefusedError{Path: ue.Path, Why: ue.Why, Outside: ue.Outside}
	}
	if err != nil || !exists {
		return rel, exists, err
	}
	fi, err := w.Lstat(rel)
	if err != nil {
		return "", false, &RefusedError{Path: p, Why: fmt.Sprintf("cannot resolve /%s: %v", rel, err)}
	}
	if !fi.IsDir() {
		return "", false, &RefusedError{Path: p, Why: fmt.Sprintf("/%s is not a directory (%s)", rel, hostfs.TypeName(fi.Mode()))}
	}
	return rel, true, nil
}

func splitPath(p string) []string { return strings.Split(strings.Trim(p, "/"), "/") }

// deepestExisting returns the deepest existing directory of rel (resolved,
// relative to root): where a statfs of rel's future file system is taken.
func deepestExisting(root *hostfs.Writable, rel string) string {
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
			return &RefusedError{Path: p, Why: fmt.Sprintf("it is a %s, not berth's directory (move it away)", hostfs.TypeName(fi.Mode()))}
		}
	}
	return nil
}
