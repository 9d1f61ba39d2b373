package discover

import (
	"io/fs"
	"path"
	"sync"
)

// VersionCache keeps the versions static sources gave for a host's
// binaries across the discoveries of a long-running process (the agent,
// every interval), so that a quiet interval does not search QEMU's
// read-only data or parse the package database again. An entry answers
// only while the binary's file and the package database's status file
// are the very files it was read from (device, inode, size, modification
// and change time): an upgrade, which replaces or rewrites either, reads
// the sources again. Safe for concurrent discoveries.
type VersionCache struct {
	mu sync.Mutex
	m  map[string]versionEntry
	// hits counts the answers given from the cache, for tests.
	hits int
}

// NewVersionCache returns an empty cache.
func NewVersionCache() *VersionCache {
	return &VersionCache{m: map[string]versionEntry{}}
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
func (c *VersionCache) get(key string, bin, dpkg fileID) (staticVersion, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok || e.bin != bin || e.dpkg != dpkg {
		return staticVersion{}, false
	}
	c.hits++
	return e.sv, true
}

func (c *VersionCache) put(key string, bin, dpkg fileID, sv staticVersion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = versionEntry{bin: bin, dpkg: dpkg, sv: sv}
}
