package hostfs_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/unixsock"
)

// TestDialUnixConfined: a socket path in a root reaches a listener in
// the root, through absolute and relative links taken as a chroot would,
// and never the listener outside that a link names as the host sees it.
// Both resolvers (openat2, the userspace walk) are held to it.
func TestDialUnixConfined(t *testing.T) {
	outsideDir := t.TempDir()
	outside := unixsock.Accepts(t, filepath.Join(outsideDir, "host.sock"))
	root := t.TempDir()
	inside := unixsock.Accepts(t, filepath.Join(root, "run/k3s/containerd/containerd.sock"))
	// A deep directory: the socket's path is longer than sun_path, so it
	// is bound at a short path and moved there (the inode keeps serving).
	deepGot := unixsock.Accepts(t, filepath.Join(root, "short.sock"))
	deep := filepath.Join(root, strings.Repeat("d/", 80), "deep.sock")
	if err := os.MkdirAll(filepath.Dir(deep), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "short.sock"), deep); err != nil {
		t.Fatal(err)
	}
	link := func(name, target string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	link("run/containerd/absolute.sock", "/run/k3s/containerd/containerd.sock")
	link("run/containerd/relative.sock", "../k3s/containerd/containerd.sock")
	link("run/containerd/host.sock", filepath.Join(outsideDir, "host.sock"))
	link("run/containerd/dotdot.sock", "../../../../../../../../.."+filepath.Join(outsideDir, "host.sock"))
	link("run/containerd/deep.sock", "/"+strings.Repeat("d/", 80)+"deep.sock")
	if err := os.WriteFile(filepath.Join(root, "run/file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "run/fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, fb := range []hostfs.Fallbacks{{}, {Walk: true}} {
		for _, tc := range []struct {
			name string
			got  <-chan struct{}
			err  error // when refused
		}{
			{"run/k3s/containerd/containerd.sock", inside, nil},
			{"/run/containerd/absolute.sock", inside, nil},
			{"run/containerd/relative.sock", inside, nil},
			{"run/containerd/deep.sock", deepGot, nil},
			{"run/containerd/host.sock", nil, os.ErrNotExist},
			{"run/containerd/dotdot.sock", nil, os.ErrNotExist},
			{"../../" + filepath.Join(outsideDir, "host.sock"), nil, os.ErrNotExist},
			{"run/file", nil, hostfs.ErrNotSocket},
			{"run/fifo", nil, hostfs.ErrNotSocket},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				c, err := hostfs.DialUnixWith(ctx, root, tc.name, fb)
				if tc.err != nil {
					if err == nil {
						c.Close()
					}
					if !errors.Is(err, tc.err) {
						t.Errorf("walk=%v: %v, want %v", fb.Walk, err, tc.err)
					}
					return
				}
				if err != nil {
					t.Fatalf("walk=%v: %v", fb.Walk, err)
				}
				c.Close()
				select {
				case <-tc.got:
				case <-time.After(5 * time.Second):
					t.Fatalf("walk=%v: the listener in the root got no connection", fb.Walk)
				}
			})
		}
	}
	select {
	case <-outside:
		t.Fatal("the listener outside the root got a connection")
	case <-time.After(100 * time.Millisecond):
	}
}
