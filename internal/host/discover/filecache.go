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
// data, parse the package database or scan pci.ids again: the versions
// static sources gave for the host's binaries, and the names of its PCI
// devices. An entry answers only while the files it was read from are
// the very same (device, inode, size, modification and change time): an
// upgrade, which replaces or rewrites one, reads it again. Safe for
// concurrent discoveries.
type FileCache struct {
	mu  sync.Mutex
	m   map[string]versionEntry
	pci map[string]pciEntry
	// hits counts the answers given from the cache, for tests.
	hits int
}

// NewFileCache returns an empty cache.
func NewFileCache() *FileCache {
	return &FileCache{m: map[string]versionEntry{}, pci: map[string]pciEntry{}}
}

// pciEntry is the names pci.ids gave for a set of device IDs.
type pciEntry struct {
	file  fileID
	names pciids.Names
}

// pciKey names a set of device IDs looked up in the pci.ids at src.
func pciKey(src string, want []pciids.ID) string {
	ids := make([]string, len(want))
	for i, w := range want {
		ids[i] = w.Vendor + ":" + w.Device
	}
	slices.Sort(ids)
	return src + "\x00" + strings.Join(slices.Compact(ids), ",")
}

// pciNames returns the names cached for key if pci.ids is unchanged.
// The maps are shared between runs: they are only read.
func (c *FileCache) pciNames(key string, file fileID) (pciids.Names, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.pci[key]
	if !ok || e.file != file {
		return pciids.Names{}, false
	}
	c.hits++
	return e.names, true
}

func (c *FileCache) putPCINames(key string, file fileID, n pciids.Names) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pci[key] = pciEntry{file: file, names: n}
}

// fileID identifies one version of a file.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

type versionEntry struct {
	bin, dpkg fileID
	sv        staticVersion
}

// versionKey names the binary found for spec at p, resolving to real.
func versionKey(spec binarySpec, p, real string) string {
	return spec.name + "\x00" + p + "\x00" + real
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

// get returns the cached version of key if the files are unchanged.
func (c *FileCache) get(key string, bin, dpkg fileID) (staticVersion, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || e.bin != bin || e.dpkg != dpkg {
		return staticVersion{}, false
	}
	c.hits++
	return e.sv, true
}

func (c *FileCache) put(key string, bin, dpkg fileID, sv staticVersion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = versionEntry{bin: bin, dpkg: dpkg, sv: sv}
}
