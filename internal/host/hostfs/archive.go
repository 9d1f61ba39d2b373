package hostfs

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// SnapshotIndex is the index of a snapshot (the snapshot package writes
// it in full as its manifest). Offline roots read from it the files that
// do not read as they did on the host: TruncatedFiles and SpecialFiles.
const SnapshotIndex = ".berth/manifest.json"

// TruncatedFile is a file a snapshot holds cut short (at the recorder's
// per-file cap, or empty when the host's file was over the cap of the
// read). Reading it from the snapshot fails with a *TruncatedError.
type TruncatedFile struct {
	Path string `json:"path"`
	// Kept is how many bytes the snapshot holds; Size is the size
	// discovery met on the host (0 when it did not learn it).
	Kept int64 `json:"kept"`
	Size int64 `json:"size,omitempty"`
}

// SpecialFile is a FIFO, socket or device node that a snapshot stores as
// an empty file (the fixture convention). Reading it from the snapshot
// fails with the *NotRegularError the host gave.
type SpecialFile struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

// snapshotIndex is the part of the index an offline root reads.
type snapshotIndex struct {
	Truncated []TruncatedFile `json:"truncated"`
	Special   []SpecialFile   `json:"special"`
}

// SnapshotLimits bound what ExtractSnapshot accepts, so that a hostile
// archive cannot fill the disk. Zero fields take the defaults.
type SnapshotLimits struct {
	// MaxBytes caps the total size of regular files (default 256 MiB).
	MaxBytes int64
	// MaxEntries caps the number of entries (default 200 000).
	MaxEntries int
}

func (l SnapshotLimits) withDefaults() SnapshotLimits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = 256 << 20
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = 200_000
	}
	return l
}

// ErrBadSnapshot wraps every reason a snapshot archive is refused.
var ErrBadSnapshot = errors.New("not a valid berth snapshot")

// ExtractSnapshot unpacks the gzip-compressed tar archive file into the
// existing empty directory dest. It refuses, with an error naming the
// entry, absolute names, names with "..", symlinks or hard links whose
// target leaves the archive's root, device nodes, FIFOs, and archives over
// the limits. Absolute symlink targets are taken relative to the archive's
// root (a host's "/usr/lib/os-release" is the snapshot's) and rewritten as
// relative links. Nothing is executed and no ownership or special mode bit
// is restored.
func ExtractSnapshot(file, dest string, lim SnapshotLimits) error {
	lim = lim.withDefaults()
	f, err := OpenRegular(file, 0)
	if nr := (*NotRegularError)(nil); errors.As(err, &nr) {
		return fmt.Errorf("opening snapshot %s: %w: not a regular file but a %s", file, ErrBadSnapshot, nr.Kind)
	} else if err != nil {
		return fmt.Errorf("opening snapshot: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("opening snapshot %s: %w: not a gzip-compressed tar archive (%v)", file, ErrBadSnapshot, err)
	}
	defer zr.Close()
	root, err := os.OpenRoot(dest)
	if err != nil {
		return fmt.Errorf("extracting snapshot %s: %w", file, err)
	}
	defer root.Close()

	tr := tar.NewReader(zr)
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if n == 0 {
				return fmt.Errorf("opening snapshot %s: %w: empty archive", file, ErrBadSnapshot)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("opening snapshot %s: %w: %v", file, ErrBadSnapshot, err)
		}
		if n >= lim.MaxEntries {
			return fmt.Errorf("opening snapshot %s: %w: more than %d entries", file, ErrBadSnapshot, lim.MaxEntries)
		}
		name, err := cleanEntryName(hdr.Name)
		if err != nil {
			return fmt.Errorf("opening snapshot %s: %w: entry %q: %v", file, ErrBadSnapshot, hdr.Name, err)
		}
		if name == "." {
			continue
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("opening snapshot %s: %w: entry %q: %s", file, ErrBadSnapshot, hdr.Name, fmt.Sprintf(format, args...))
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return bad("creating parent: %v", err)
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return bad("%v", err)
			}
		case tar.TypeReg:
			if hdr.Size < 0 || total+hdr.Size > lim.MaxBytes {
				return bad("archive content exceeds %d bytes", lim.MaxBytes)
			}
			total += hdr.Size
			if err := writeEntry(root, name, hdr, tr); err != nil {
				return bad("%v", err)
			}
		case tar.TypeSymlink:
			target, err := inRootTarget(name, hdr.Linkname)
			if err != nil {
				return bad("%v", err)
			}
			if err := root.Symlink(target, name); err != nil {
				return bad("%v", err)
			}
		case tar.TypeLink:
			old, err := cleanEntryName(hdr.Linkname)
			if err != nil || old == "." {
				return bad("hard link to %q leaves the snapshot", hdr.Linkname)
			}
			if err := root.Link(old, name); err != nil {
				return bad("%v", err)
			}
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			return bad("device nodes and FIFOs are not allowed (snapshots store them as empty files)")
		case tar.TypeXGlobalHeader:
			// PAX global headers carry no file.
		default:
			return bad("unsupported entry type %q", string(hdr.Typeflag))
		}
	}
}

// writeEntry writes one regular file with its permission bits only.
func writeEntry(root *os.Root, name string, hdr *tar.Header, r io.Reader) error {
	out, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, os.FileMode(hdr.Mode).Perm()|0o400)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(out, r, hdr.Size); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// cleanEntryName accepts only relative names that stay inside the root.
func cleanEntryName(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty name")
	}
	if strings.HasPrefix(name, "/") {
		return "", errors.New("absolute path")
	}
	if strings.ContainsRune(name, 0) || strings.Contains(name, "\\") {
		return "", errors.New("invalid character in name")
	}
	for _, c := range strings.Split(strings.TrimSuffix(name, "/"), "/") {
		if c == ".." {
			return "", errors.New("path contains \"..\"")
		}
	}
	return path.Clean(name), nil
}

// inRootTarget checks that the symlink name -> target resolves, lexically,
// inside the root, and returns the target as a relative link. os.Root
// guards the rest (chains of links) at read time.
func inRootTarget(name, target string) (string, error) {
	if target == "" || strings.ContainsRune(target, 0) {
		return "", errors.New("empty or invalid symlink target")
	}
	var abs string
	if path.IsAbs(target) {
		abs = path.Clean(target)
	} else {
		abs = path.Join("/", path.Dir(name), target)
	}
	// path.Join of "/" with ".." components clamps at "/", which would hide
	// an escape: count depth instead.
	if !path.IsAbs(target) {
		depth := strings.Count(path.Dir(name), "/") + 1
		if path.Dir(name) == "." {
			depth = 0
		}
		for _, c := range strings.Split(target, "/") {
			switch c {
			case "..":
				depth--
			case ".", "":
			default:
				depth++
			}
			if depth < 0 {
				return "", fmt.Errorf("symlink target %q leaves the snapshot", target)
			}
		}
		return target, nil
	}
	if strings.Contains(target, "/../") || strings.HasSuffix(target, "/..") {
		return "", fmt.Errorf("symlink target %q leaves the snapshot", target)
	}
	return relativeTo(path.Dir(name), strings.TrimPrefix(abs, "/")), nil
}

// SnapshotLinkTarget returns the target under which a snapshot stores the
// symlink name -> target of a host root, so that ExtractSnapshot accepts
// it and it still resolves as it did under chroot semantics: a relative
// target that climbs above the root (where ".." stopped at the root)
// becomes the absolute path it reached, and an absolute one is cleaned.
// Other targets are kept as the host has them.
func SnapshotLinkTarget(name, target string) string {
	if _, err := inRootTarget(name, target); err == nil || target == "" {
		return target
	}
	var stack []string
	if !path.IsAbs(target) && path.Dir(name) != "." {
		stack = strings.Split(path.Dir(name), "/")
	}
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		default:
			stack = append(stack, c)
		}
	}
	return "/" + strings.Join(stack, "/")
}

// relativeTo returns the relative path from directory dir to target, both
// relative to the root.
func relativeTo(dir, target string) string {
	if target == "" {
		target = "."
	}
	var from []string
	if dir != "." {
		from = strings.Split(dir, "/")
	}
	to := strings.Split(target, "/")
	i := 0
	for i < len(from) && i < len(to) && from[i] == to[i] {
		i++
	}
	parts := make([]string, 0, len(from)-i+len(to)-i)
	for range from[i:] {
		parts = append(parts, "..")
	}
	parts = append(parts, to[i:]...)
	if len(parts) == 0 {
		return "."
	}
	return path.Join(parts...)
}
