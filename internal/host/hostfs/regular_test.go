package hostfs_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
)

// TestOpenRegular: only a regular file within the cap is opened; a FIFO
// (whose open would block), a device (whose read never ends) and a
// directory are refused at once by kind, and a file grown past the cap
// after the open is refused by LimitedReader.
func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		limit int64
		want  error
		kind  string
	}{
		{file, 10, nil, ""},
		{file, 0, nil, ""},
		{filepath.Join(dir, "link"), 10, nil, ""},
		{file, 9, hostfs.ErrTooLarge, ""},
		{filepath.Join(dir, "fifo"), 0, hostfs.ErrNotRegular, "FIFO"},
		{"/dev/zero", 0, hostfs.ErrNotRegular, "character device"},
		{dir, 0, hostfs.ErrNotRegular, "directory"},
		{filepath.Join(dir, "none"), 0, os.ErrNotExist, ""},
	} {
		done := make(chan error, 1)
		go func() {
			f, err := hostfs.OpenRegular(tc.name, tc.limit)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			var nr *hostfs.NotRegularError
			if !errors.Is(err, tc.want) || (tc.kind != "" && (!errors.As(err, &nr) || nr.Kind != tc.kind)) {
				t.Errorf("OpenRegular(%s, %d): %v, want %v %s", tc.name, tc.limit, err, tc.want, tc.kind)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("OpenRegular(%s) blocked", tc.name)
		}
	}
	f, err := hostfs.OpenRegular(file, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.WriteFile(file, []byte("0123456789 and more"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(hostfs.LimitedReader(f, 10)); !errors.Is(err, hostfs.ErrTooLarge) {
		t.Errorf("reading a file grown past the cap: %v", err)
	}
}
