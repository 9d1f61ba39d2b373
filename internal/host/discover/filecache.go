package discover

import (
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"berth.dev/berth/internal/host/pciids"
)

// FileCache keeps what discovery read from files that rarely change
// across the discoveries of a long-running process (the agent, every
// interval), so that a quiet interval does not search QEMU's read-only
// data, parse the package database, scan pci.ids or decompress the
// kernel config again: the versions static sources gave for the host's
// binaries, the names of its PCI devices and the kernel config. An entry
// answers only while the files it was read from are the very same
// (device, inode, size, modification and change time): an upgrade, which
// replaces or rewrites one, reads it again. Safe for concurrent
// discoveries.
type FileCache struct {
	mu sync.Mutex
	m  map[string]cacheEntry
	// hits counts the answers given from the cache by kind (what keys
	// start with: "version", "pci", "kernelconfig", "modparams"), for
	// tests.
	hits map[string]int
}

// cacheEntry is a value read from files, with the identities they had.
type cacheEntry struct {
	files []fileID
	value any
}

// NewFileCache returns an empty cache.
func NewFileCache() *FileCache {
	return &FileCache{m: map[string]cacheEntry{}, hits: map[string]int{}}
}

// pciKey names a set of device IDs looked up in the pci.ids at src.
func pciKey(src string, want []pciids.ID) string {
	ids := make([]string, len(want))
	for i, w := range want {
		ids[i] = w.Vendor + ":" + w.Device
	}
	slices.Sort(ids)
	return "pci\x00" + src + "\x00" + strings.Join(slices.Compact(ids), ",")
}

// fileID identifies one version of a file.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

// versionKey names the binary found for spec at p, resolving to real.
func versionKey(spec binarySpec, p, real string) string {
	return "version\x00" + spec.name + "\x00" + p + "\x00" + real
}

// ids identifies the files a static version of real was read from; ok is
// false when they cannot be told apart (no stat, not Linux): nothing is
// cached then.
func (l *staticLookup) ids(real string) (bin, dpkg fileID, ok bool) {
	fi, err := fs.Stat(l.s.root.FS(), real)
	if err != nil {
		return fileID{}, fileID{}, false
	}
	if bin, ok = identify(fi); !ok {
		return fileID{}, fileID{}, false
	}
	// No database is a state of its own: the zero identity.
	if fi, err := fs.Stat(l.s.root.FS(), path.Join(dpkgDir, "status")); err == nil {
		if dpkg, ok = identify(fi); !ok {
			return fileID{}, fileID{}, false
		}
	}
	return bin, dpkg, true
}

// get returns the value cached under key if it was read from files
// with the identities given, in order.
func (c *FileCache) get(key string, files ...fileID) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || !slices.Equal(e.files, files) {
		return nil, false
	}
	kind, _, _ := strings.Cut(key, "\x00")
	c.hits[kind]++
	return e.value, true
}

// put caches value, read from files with the identities given.
func (c *FileCache) put(key string, value any, files ...fileID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = cacheEntry{files: files, value: value}
}

// cachedFrom returns what read gives for the file at p: from s's cache,
// under key, while that file is the very one it was read from. With no
// cache, or a file that cannot be told apart, it reads every time. The
// identity is taken before reading, so a file replaced in between is read
// again next time rather than kept under its new identity.
func cachedFrom[T any](s *session, p, key string, read func() (T, error)) (T, error) {
	c := s.opt.Cache
	id, ok := s.cacheID(p)
	if !ok {
		return read()
	}
	if v, ok := c.get(key, id); ok {
		return v.(T), nil
	}
	v, err := read()
	if err == nil {
		c.put(key, v, id)
	}
	return v, err
}

// cacheID is the identity of the file (or directory) at p under which
// s's cache keeps what was read from it; ok is false with no cache, or
// when the file cannot be told apart from another version of it.
func (s *session) cacheID(p string) (fileID, bool) {
	if s.opt.Cache == nil {
		return fileID{}, false
	}
	fi, err := fs.Stat(s.root.FS(), p)
	if err != nil {
		return fileID{}, false
	}
	return identify(fi)
}
