package hostfs

import (
	"fmt"
	"os"
	"path/filepath"
)

// Open opens the host root named by path:
//
//   - "/": the live system ("" is an error, as for OpenWritable: an unset
//     variable in a script must not mean this machine's root);
//   - a directory with live set: a live host mounted there (commands run
//     chrooted into it);
//   - a directory: an offline root (fixture tree, mounted disk);
//   - a file: a snapshot archive (.tar.gz), unpacked safely into a temporary
//     directory and served offline.
//
// cleanup releases what Open created (the unpacked snapshot) and is never
// nil, even on error.
func Open(path string, live bool) (Root, func(), error) {
	return openWith(path, live, nil, confineOptions{})
}

// OpenUnpacking is Open that calls beforeUnpack, when path is a snapshot,
// before anything is created: berth subscribes to signals there, so that
// the unpacked directory cannot outlive an interrupted run, and only
// there (a read of the live system or a directory creates nothing). An
// error from beforeUnpack is returned as it is, and nothing is unpacked.
func OpenUnpacking(path string, live bool, beforeUnpack func() error) (Root, func(), error) {
	return openWith(path, live, beforeUnpack, confineOptions{})
}

// openWith is OpenUnpacking with opt's fallbacks.
func openWith(path string, live bool, beforeUnpack func() error, opt confineOptions) (Root, func(), error) {
	noop := func() {}
	if path == "" {
		return nil, noop, errEmptyRoot
	}
	if filepath.Clean(path) == "/" {
		l, err := newLiveWith("/", opt)
		return l, noop, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, noop, fmt.Errorf("opening host root: %w", err)
	}
	if !st.IsDir() {
		if !st.Mode().IsRegular() {
			return nil, noop, fmt.Errorf("opening host root %s: neither a directory nor a snapshot file, but a %s", path, kindOf(fileFormat(st.Mode())))
		}
		if live {
			return nil, noop, fmt.Errorf("opening host root %s: --live needs a directory where a running host is mounted, not a snapshot file", path)
		}
		if beforeUnpack != nil {
			if err := beforeUnpack(); err != nil {
				return nil, noop, err
			}
		}
		return openSnapshotWith(path, SnapshotLimits{}, opt)
	}
	if live {
		l, err := newLiveWith(path, opt)
		return l, noop, err
	}
	d, err := openDirWith(path, opt)
	if err != nil {
		return nil, noop, err
	}
	return d, noop, nil
}

// OpenSnapshot unpacks the snapshot archive file into a temporary
// directory and opens it as an offline root whose Path is file. Reads go
// through the same confined layer as every root: they cannot leave the
// unpacked tree, even through symlinks.
func OpenSnapshot(file string, lim SnapshotLimits) (Root, func(), error) {
	return openSnapshotWith(file, lim, confineOptions{})
}

// openSnapshotWith is OpenSnapshot with opt's fallbacks.
func openSnapshotWith(file string, lim SnapshotLimits, opt confineOptions) (Root, func(), error) {
	noop := func() {}
	tmp, err := os.MkdirTemp("", "berth-snapshot-")
	if err != nil {
		return nil, noop, fmt.Errorf("opening snapshot %s: %w", file, err)
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	if err := ExtractSnapshot(file, tmp, lim); err != nil {
		cleanup()
		return nil, noop, err
	}
	c, err := newConfinedFS(tmp, opt)
	if err != nil {
		cleanup()
		return nil, noop, fmt.Errorf("opening snapshot %s: %w", file, err)
	}
	d, err := openDirFS(file, c)
	if err != nil {
		c.close()
		cleanup()
		return nil, noop, fmt.Errorf("opening snapshot %s: %w", file, err)
	}
	return d, func() { c.close(); cleanup() }, nil
}
