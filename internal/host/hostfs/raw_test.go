package hostfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/testkit"
)

// TestOpenRaw: raw reads stay inside a live root, are never recorded by a
// Recorder, and are refused on an offline root.
func TestOpenRaw(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "usr/bin/tool"), []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"bin": "usr/bin", "escape": filepath.Join(outside, "secret"), "up": "../" + filepath.Base(outside) + "/secret"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	live, err := NewLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := NewRecorder(live)
	tests := []struct {
		name string
		want string // content, or "" for an error
	}{
		{"usr/bin/tool", "binary"},
		{"bin/tool", "binary"},
		{"escape", ""},
		{"up", ""},
		{"../" + filepath.Base(outside) + "/secret", ""},
		{"/usr/bin/tool", ""},
	}
	for _, tt := range tests {
		for _, r := range []RawReader{live, rec} {
			f, err := r.OpenRaw(tt.name)
			if tt.want == "" {
				if err == nil {
					f.Close()
					t.Errorf("%T.OpenRaw(%q) opened a file outside the root or an invalid path", r, tt.name)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%T.OpenRaw(%q): %v", r, tt.name, err)
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil || string(b) != tt.want {
				t.Errorf("%T.OpenRaw(%q) read %q, %v; want %q", r, tt.name, b, err, tt.want)
			}
		}
	}
	if c := rec.Capture(); len(c.Entries) != 0 {
		t.Errorf("raw reads were recorded: %+v", c.Entries)
	}

	off, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewRecorder(off).OpenRaw("usr/bin/tool"); !errors.Is(err, ErrOffline) {
		t.Errorf("Recorder over an offline root: OpenRaw error %v, want ErrOffline", err)
	}
	if _, ok := Root(off).(RawReader); ok {
		t.Error("an offline Dir root must not read raw")
	}
}

// TestOpenDevice: device nodes of a live root open through the root, and
// only character devices.
func TestOpenDevice(t *testing.T) {
	forEachVariant(t, func(t *testing.T, opt confineOptions) {
		dir := t.TempDir()
		mkTree(t, dir, map[string]string{"dev/": "", "dev/file": "x", "dev/kvm": "-> /dev/null", "dev/out": "-> ../../../../../../../../dev/null"})
		mkSpecial(t, filepath.Join(dir, "dev/fifo"), "", "")
		l, err := newLiveWith(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"dev/kvm", "dev/out", "dev/file", "dev/fifo"} {
			if fd, err := l.OpenDevice(n, syscall.O_RDWR); err == nil {
				syscall.Close(fd)
				t.Errorf("OpenDevice(%s) opened: the root has no character device there", n)
			}
		}
		testkit.NeedsRoot(t, "mknod of a character device")
		if err := unix.Mknod(filepath.Join(dir, "dev/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatalf("mknod (the tests run as root, as CI does): %v", err)
		}
		for _, n := range []string{"dev/kvm", "dev/out"} {
			fd, err := l.OpenDevice(n, syscall.O_RDWR)
			if err != nil {
				t.Errorf("OpenDevice(%s): %v", n, err)
				continue
			}
			syscall.Close(fd)
		}
	})
}
