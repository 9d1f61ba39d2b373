package discover

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit"
)

// TestReadReasonHostRoot: the host root's refusals (a FIFO, socket or
// device where a file is expected, a file over its cap, a file cut short
// in a snapshot) become unknown facts with that reason, never an abort.
func TestReadReasonHostRoot(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&fs.PathError{Op: "open", Path: "proc/cpuinfo", Err: &hostfs.NotRegularError{Kind: "FIFO"}}, "not a regular file (FIFO): proc/cpuinfo"},
		{&fs.PathError{Op: "read", Path: "dmesg", Err: &hostfs.TooLargeError{Limit: 16 << 20}}, "larger than 16777216 bytes: dmesg"},
		{&fs.PathError{Op: "read", Path: "x", Err: &hostfs.TruncatedError{Kept: 8, Size: 10}}, "truncated in snapshot: x (8 of 10 bytes kept)"},
		{&fs.PathError{Op: "read", Path: "x", Err: &hostfs.TruncatedError{Kept: 0}}, "truncated in snapshot: x (0 bytes kept)"},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ENOENT}, "missing: x"},
		{&fs.PathError{Op: "open", Path: "x", Err: syscall.ELOOP}, "unreadable: x: open x: too many levels of symbolic links"},
	} {
		if got := ReadReason(tt.err.(*fs.PathError).Path, tt.err); got != tt.want {
			t.Errorf("ReadReason(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}

	// Through discovery of a root: unknown with the reason.
	root := coreRoot(t, map[string]string{"proc/meminfo": "MemTotal: 1 kB\n"})
	fifo := filepath.Join(root.Path(), "proc/cmdline")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", filepath.Join(root.Path(), "proc/cpuinfo")); err != nil {
		t.Fatal(err)
	}
	// The root's own /dev/null, a real character device.
	if err := os.Mkdir(filepath.Join(root.Path(), "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	testkit.NeedsRoot(t, "mknod of a character device")
	if err := unix.Mknod(filepath.Join(root.Path(), "dev/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatalf("mknod (the tests run as root, as CI does): %v", err)
	}
	_, unknown := runSub(t, root, runKernel)
	if r := unknown["kernel.cmdline"]; r != "not a regular file (FIFO): proc/cmdline" {
		t.Errorf("kernel.cmdline: %q", r)
	}
	_, unknown = runSub(t, root, runCPU)
	if r := unknown["cpu"]; !strings.HasPrefix(r, "not a regular file (character device): proc/cpuinfo") {
		t.Errorf("cpu: %q", r)
	}
}
