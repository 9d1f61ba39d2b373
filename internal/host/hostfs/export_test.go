package hostfs

import (
	"context"
	"net"
)

// Exported for the external test package (hostile_test.go).

// Fallbacks are the mechanisms a machine without openat2 (walk: paths
// resolved in userspace) or without procfs (noProc: a checked file
// reopened by resolving it again instead of through /proc/self/fd) uses;
// the *With constructors force them.
type Fallbacks struct{ Walk, NoProc bool }

func (f Fallbacks) options() confineOptions {
	return confineOptions{walk: f.Walk, noProc: f.NoProc}
}

// OpenDirWith is OpenDir with the fallbacks f.
func OpenDirWith(dir string, f Fallbacks) (*Dir, error) { return openDirWith(dir, f.options()) }

// NewLiveWith is NewLive with the fallbacks f.
func NewLiveWith(dir string, f Fallbacks) (*Live, error) { return newLiveWith(dir, f.options()) }

// OpenWith is Open with the fallbacks f.
func OpenWith(path string, live bool, f Fallbacks) (Root, func(), error) {
	return openWith(path, live, nil, f.options())
}

// ResolverOf names the mechanisms a root uses ("openat2", "walk",
// "+reresolve"), or "" for a root that is not a directory or live root.
func ResolverOf(r Root) string {
	switch r := r.(type) {
	case *Dir:
		return r.cfs.resolver()
	case *Live:
		return r.fsys.resolver()
	}
	return ""
}

// HaveOpenat2 reports whether this kernel has openat2 with RESOLVE_IN_ROOT.
func HaveOpenat2() bool { return haveOpenat2() }

// DialUnixWith is DialUnix with the fallbacks f.
func DialUnixWith(ctx context.Context, dir, name string, f Fallbacks) (net.Conn, error) {
	return dialUnixWith(ctx, dir, name, f.options())
}
