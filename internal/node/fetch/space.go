package fetch

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultMaxItemSize is the default upper bound on one component's declared
// size: the largest files of a Kata or Contrast release (guest images,
// the GPU rootfs) are a few GiB, and a manifest declaring more is refused
// before anything is downloaded unless the operator raises the limit.
const DefaultMaxItemSize = 8 << 30

// SizeError is an item declaring more bytes than the limit.
type SizeError struct {
	Component string
	Size      int64
	Limit     int64
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("component %s declares %s (%d bytes), above the limit of %s per component: refusing to fetch it (raise the limit if the manifest is right)",
		e.Component, Human(e.Size), e.Size, Human(e.Limit))
}

// CheckSize refuses an item declaring more than limit bytes (0: no limit).
func CheckSize(it Item, limit int64) error {
	if limit > 0 && it.Size > limit {
		return &SizeError{Component: it.Name, Size: it.Size, Limit: limit}
	}
	return nil
}

// SpaceNeed is what a fetch will write on one file system.
type SpaceNeed struct {
	// Path is where (a directory, for messages).
	Path string
	// Dev is the file system's device and Free its bytes available to
	// berth (statfs f_bavail), as FreeSpace returns them.
	Dev  uint64
	Free uint64
	// Items will be written there whole; Extra bytes come on top (tar
	// headers, say).
	Items []Item
	Extra int64
}

// SpaceError is a fetch that the target file system has no room for.
type SpaceError struct {
	Path  string
	Need  int64
	Free  uint64
	Items []Item
}

func (e *SpaceError) Error() string {
	items := slices.Clone(e.Items)
	slices.SortStableFunc(items, func(a, b Item) int { return cmp.Compare(b.Size, a.Size) })
	var names []string
	for i, it := range items {
		if i == 4 {
			names = append(names, fmt.Sprintf("and %d more", len(items)-i))
			break
		}
		names = append(names, fmt.Sprintf("%s %s (%d bytes)", it.Name, Human(it.Size), it.Size))
	}
	return fmt.Sprintf("not enough free space on the file system of %s: need %s (%d bytes) for %s, %s (%d bytes) free: nothing was fetched",
		e.Path, Human(e.Need), e.Need, strings.Join(names, ", "), Human(int64(min(e.Free, 1<<62))), e.Free)
}

// CheckSpace adds up the needs per file system (needs on one device share
// its free space) and refuses the first file system they do not fit on.
func CheckSpace(needs []SpaceNeed) error {
	type fsNeed struct {
		SpaceNeed
		bytes int64
	}
	var order []uint64
	by := map[uint64]*fsNeed{}
	for _, n := range needs {
		if len(n.Items) == 0 && n.Extra == 0 {
			continue
		}
		t := by[n.Dev]
		if t == nil {
			t = &fsNeed{SpaceNeed: SpaceNeed{Path: n.Path, Dev: n.Dev, Free: n.Free}}
			by[n.Dev] = t
			order = append(order, n.Dev)
		}
		t.Items = append(t.Items, n.Items...)
		t.bytes += n.Extra
		for _, it := range n.Items {
			t.bytes += it.Size
		}
	}
	for _, d := range order {
		t := by[d]
		if t.bytes > 0 && uint64(t.bytes) > t.Free {
			return &SpaceError{Path: t.Path, Need: t.bytes, Free: t.Free, Items: t.Items}
		}
	}
	return nil
}

// DirRoot is a directory files are opened through: an *os.Root or a
// *hostfs.Writable.
type DirRoot interface {
	Open(name string) (*os.File, error)
	Name() string
}

// FreeSpace returns the device and the bytes available (f_bavail, what an
// unprivileged writer may use; root's reserve is not counted) of the file
// system dir is on, or would be on once created: its deepest existing
// directory is asked. With root set, dir is slash-separated and relative
// to root, and is opened through it.
func FreeSpace(root DirRoot, dir string) (dev, free uint64, at string, err error) {
	var f *os.File
	for d := dir; ; {
		if root != nil {
			f, err = root.Open(d)
			at = filepath.Join(root.Name(), filepath.FromSlash(d))
		} else {
			f, err = os.Open(d)
			at = d
		}
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return 0, 0, at, err
		}
		var up string
		if root != nil {
			up = path.Dir(d)
		} else {
			up = filepath.Dir(d)
		}
		if up == d {
			return 0, 0, at, err
		}
		d = up
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return 0, 0, at, fmt.Errorf("statfs %s: %w", at, err)
	}
	var s unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &s); err != nil {
		return 0, 0, at, fmt.Errorf("stat %s: %w", at, err)
	}
	return uint64(s.Dev), st.Bavail * uint64(st.Bsize), at, nil
}

// CacheNeed is what fetching items puts into the cache: the items no
// local source (--from, the cache itself) has, less what partial
// downloads already hold. It is nil without a cache.
func (f *Fetcher) CacheNeed(items []Item) (*SpaceNeed, error) {
	if f.Cache == "" {
		return nil, nil
	}
	var dev, free uint64
	var at string
	var err error
	cr, err := f.OpenCache(false)
	if err != nil {
		return nil, err
	}
	switch {
	case cr != nil:
		dev, free, at, err = FreeSpace(cr, ".")
	case f.CacheIn != nil:
		dev, free, at, err = FreeSpace(f.CacheIn, f.CacheRel)
	default:
		dev, free, at, err = FreeSpace(nil, f.Cache)
	}
	if err != nil {
		return nil, fmt.Errorf("cache %s: %w", f.Cache, err)
	}
	n := &SpaceNeed{Path: at, Dev: dev, Free: free}
	for _, it := range items {
		if _, ok := f.Local(it); ok || !hasURL(it) {
			continue
		}
		if cr != nil {
			if fi, err := cr.Lstat(cacheName(it.SHA256) + ".partial"); err == nil && fi.Mode().IsRegular() {
				n.Extra -= min(fi.Size(), it.Size)
			}
		}
		n.Items = append(n.Items, it)
	}
	return n, nil
}

func hasURL(it Item) bool {
	for _, s := range it.Sources {
		low := strings.ToLower(s)
		if strings.HasPrefix(low, "http://") || strings.HasPrefix(low, "https://") {
			return true
		}
	}
	return false
}

// Human formats a byte count for people.
func Human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
