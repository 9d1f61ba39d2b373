package hostfs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotSocket: a path that should be a unix socket (a runtime's CRI
// socket) is something else.
var ErrNotSocket = errors.New("not a socket")

// ErrNoProc: connecting to a socket resolved inside a root needs procfs
// (/proc/self/fd), which this machine does not have mounted.
var ErrNoProc = errors.New("no procfs at /proc to connect through")

// DialUnix connects to the unix socket name (a path inside the host root
// dir, "/" being the live host) as a process chrooted into dir would:
// every symlink on the way is resolved inside dir (an absolute target is
// relative to dir, ".." stops at it; see confinedFS), so a link in the
// root can never make berth dial a socket outside it. The connection is
// made through the resolved handle itself: connect(2) to
// /proc/self/fd/N, whose magic link the kernel follows to that very
// inode (and which also keeps a deep path within sun_path's 108 bytes),
// so nothing is resolved a second time. A name that resolves to anything
// but a socket is refused unconnected.
func DialUnix(ctx context.Context, dir, name string) (net.Conn, error) {
	return dialUnixWith(ctx, dir, name, confineOptions{})
}

func dialUnixWith(ctx context.Context, dir, name string, opt confineOptions) (net.Conn, error) {
	if procSelfFd() < 0 {
		return nil, fmt.Errorf("socket %s in %s: %w", name, dir, ErrNoProc)
	}
	c, err := newConfinedFS(dir, opt)
	if err != nil {
		return nil, fmt.Errorf("host root %s: %w", dir, err)
	}
	defer c.close()
	rel := strings.TrimPrefix(path.Clean("/"+name), "/")
	if rel == "" {
		return nil, fmt.Errorf("socket %s in %s: the root itself is not a socket", name, dir)
	}
	fd, fi, err := c.lookup("dial", rel, true)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if fi.format() != syscall.S_IFSOCK {
		return nil, pathErr("dial", rel, fmt.Errorf("%w: a %s", ErrNotSocket, kindOf(fi.format())))
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return nil, pathErr("dial", rel, err)
	}
	return conn, nil
}
