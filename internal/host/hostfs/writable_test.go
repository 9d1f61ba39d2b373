package hostfs_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/hostfs"
)

// TestResolve: the one chroot-style resolver of every write, on links of
// every kind (absolute inside, relative, climbing out, dangling, loops, a
// file on the way), by absolute host path and by root-relative name.
func TestResolve(t *testing.T) {
	outsideDir := t.TempDir()
	root := t.TempDir()
	mk := func(p string) { os.MkdirAll(filepath.Join(root, p), 0o755) }
	ln := func(target, p string) {
		os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
		if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("var/opt")
	mk("elsewhere")
	mk("srv/a/b")
	mk("etc/containerd")
	os.WriteFile(filepath.Join(root, "srv/real.toml"), nil, 0o644)
	ln("/elsewhere", "abs")        // absolute, inside the root
	ln("var/opt", "rel")           // relative, inside
	ln("../../..", "deep/up")      // climbs out
	ln(outsideDir, "out")          // absolute: resolved in the root, where it does not exist
	ln("/srv/a/b/../../a", "dots") // ".." in a target
	ln("../elsewhere", "srv/sib")  // relative with ".." staying inside
	ln("loop2", "loop1")           // a loop
	ln("loop1", "loop2")           //
	ln("/abs", "chain")            // a link to a link
	ln("/nowhere", "dangling")     // dangling
	ln("/srv/real.toml", "etc/containerd/config.toml")
	ln("/etc/containerd/gone.toml", "etc/containerd/dangling.toml") // its directory exists, it does not
	ln("../../srv/real.toml", "etc/containerd/relative.toml")
	os.WriteFile(filepath.Join(root, "file"), nil, 0o644)
	w, err := hostfs.OpenWritable(root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tc := range []struct {
		in, rel string
		exists  bool
		refuse  string
		outside bool
	}{
		{in: "/", rel: ".", exists: true},
		{in: "/opt/berth", rel: "opt/berth"},
		{in: "opt/berth", rel: "opt/berth"},
		{in: "/var/opt", rel: "var/opt", exists: true},
		{in: "/abs/berth", rel: "elsewhere/berth"},
		{in: "/rel/berth", rel: "var/opt/berth"},
		{in: "/dots/b", rel: "srv/a/b", exists: true},
		{in: "/srv/sib/berth", rel: "elsewhere/berth"},
		{in: "/chain/y", rel: "elsewhere/y"},
		{in: "/chain/x/y", rel: "elsewhere/x/y"},
		{in: "etc/containerd/config.toml", rel: "srv/real.toml", exists: true},
		{in: "etc/containerd/relative.toml", rel: "srv/real.toml", exists: true},
		{in: "/file", rel: "file", exists: true},
		{in: "etc/containerd/dangling.toml", refuse: "which does not exist inside the host root"},
		{in: "/deep/up/berth", refuse: "resolves outside the host root", outside: true},
		{in: "/out/berth", refuse: "does not exist inside the host root"},
		{in: "/dangling/berth", refuse: "does not exist inside the host root"},
		{in: "/dangling", refuse: "does not exist inside the host root"},
		{in: "/opt/../../../tmp", refuse: `".."`, outside: true},
		{in: "/loop1/x", refuse: "too many levels"},
		{in: "/file/berth", refuse: "not a directory"},
		{in: "", refuse: "expected a path"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			rel, exists, err := w.Resolve(tc.in)
			if tc.refuse != "" {
				var ue *hostfs.UnsafePathError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.refuse) || errors.Is(err, hostfs.ErrOutsideRoot) != tc.outside {
					t.Fatalf("Resolve(%s) = %q, %v, %v; want a refusal with %q (outside %v)", tc.in, rel, exists, err, tc.refuse, tc.outside)
				}
				return
			}
			if err != nil || rel != tc.rel || exists != tc.exists {
				t.Fatalf("Resolve(%s) = %q, %v, %v; want %q, %v", tc.in, rel, exists, err, tc.rel, tc.exists)
			}
		})
	}
	if ents, _ := os.ReadDir(outsideDir); len(ents) != 0 {
		t.Errorf("resolving created %v outside", ents)
	}
}

// TestHostileWritable runs the attacks of TestHostileRoots against the
// writer: for every path an attack plants, Resolve gives the path inside
// the root the attack's writer entry names (or refuses it), a bounded read
// never blocks, never reads a device and never returns the canary, and an
// atomic write through the resolved path lands there. Nothing outside the
// root changes.
func TestHostileWritable(t *testing.T) {
	e := buildHostile(t)
	before := listing(t, e.outside)
	w, err := hostfs.OpenWritable(e.root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, a := range attacks {
		if len(a.writer) == 0 {
			t.Errorf("attack %q: no writer expectation", a.name)
		}
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range a.writer {
				if !yield(k) {
					return
				}
			}
		}) {
			want := a.writer[name]
			t.Run(a.name+"/"+name, func(t *testing.T) {
				var data []byte
				var rerr error
				runBounded(t, "reading "+name, func() { data, rerr = w.ReadFileMax(name, hostfs.MaxConfigFile) })
				if strings.Contains(string(data), e.canary) {
					t.Fatalf("read the canary through %s", name)
				}
				if fi, err := os.Lstat(filepath.Join(e.root, want)); want != "refuse" && err == nil && !fi.Mode().IsRegular() {
					if !errors.Is(rerr, hostfs.ErrNotRegular) {
						t.Errorf("ReadFileMax(%s) of a %v: %v, want a not-a-regular-file refusal", name, fi.Mode().Type(), rerr)
					}
				}
				rel, _, err := w.Resolve(name)
				if want == "refuse" {
					var ue *hostfs.UnsafePathError
					if !errors.As(err, &ue) {
						t.Fatalf("Resolve(%s) = %q, %v; want a refusal", name, rel, err)
					}
					if !errors.As(rerr, &ue) {
						t.Errorf("ReadFileMax(%s) = %v; want the resolver's refusal", name, rerr)
					}
					return
				}
				if err != nil || rel != want {
					t.Fatalf("Resolve(%s) = %q, %v; want %q", name, rel, err, want)
				}
				fi, _ := w.Lstat(rel)
				if fi != nil && fi.IsDir() {
					// A directory where a file was expected: the rename
					// over it fails, and nothing is written.
					if err := hostfs.WriteAtomic(w, rel, []byte("berth"), 0o644); err == nil {
						t.Errorf("WriteAtomic over the directory %s succeeded", rel)
					}
					return
				}
				if err := hostfs.WriteAtomic(w, rel, []byte("berth"), 0o644); err != nil {
					t.Fatalf("WriteAtomic(%s): %v", rel, err)
				}
				if b, err := os.ReadFile(filepath.Join(e.root, rel)); err != nil || string(b) != "berth" {
					t.Errorf("%s after the write: %q, %v", rel, b, err)
				}
			})
		}
	}
	if after := listing(t, e.outside); !slices.Equal(before, after) {
		t.Errorf("outside the root changed:\n%v\nnow\n%v", before, after)
	}
	if b, _ := os.ReadFile(filepath.Join(e.outside, "canary")); string(b) != e.canary+"\n" {
		t.Errorf("canary changed: %q", b)
	}
}

// TestOpenWritable: --root for writing is a directory, once; "", a
// snapshot archive and a FIFO are refused at once with one clear error.
func TestOpenWritable(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "snap.tar.gz")
	os.WriteFile(snap, []byte("x"), 0o644)
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, dir, want string }{
		{"empty", "", "an empty path"},
		{"snapshot", snap, "a snapshot cannot be written"},
		{"FIFO", fifo, "not a FIFO"},
		{"missing", filepath.Join(dir, "missing"), "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			runBounded(t, "opening "+tc.dir, func() { _, err = hostfs.OpenWritable(tc.dir) })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OpenWritable(%q) = %v, want %q", tc.dir, err, tc.want)
			}
		})
	}
	w, err := hostfs.OpenWritable(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if w.Name() != dir {
		t.Errorf("Name() = %s, want %s", w.Name(), dir)
	}
}

// TestReadFileMax: what berth edits or imports is read only if it is a
// regular file within its cap. A FIFO is refused at once (it would block
// for good), a character device is never read (/dev/zero would grow
// without end), a file over the cap is refused naming the cap, from its
// size, without being read.
func TestReadFileMax(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "etc/containerd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "etc/containerd/fifo.toml"), 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.NeedsRoot(t, "mknod of a character device")
	if err := unix.Mknod(filepath.Join(dir, "etc/containerd/zero.toml"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
		t.Fatalf("mknod (the tests run as root, as CI does): %v", err)
	}
	big := filepath.Join(dir, "etc/containerd/big.toml")
	os.WriteFile(big, nil, 0o644)
	if err := os.Truncate(big, 1<<30); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "etc/containerd/ok.toml"), []byte("version = 2\n"), 0o644)
	os.Symlink("/etc/containerd/fifo.toml", filepath.Join(dir, "etc/containerd/config.toml"))
	w, err := hostfs.OpenWritable(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, tc := range []struct{ name, want string }{
		{"etc/containerd/fifo.toml", "not a regular file: FIFO"},
		{"etc/containerd/config.toml", "not a regular file: FIFO"},
		{"etc/containerd/zero.toml", "not a regular file: character device"},
		{"etc/containerd/big.toml", "larger than 16777216 bytes"},
		{"etc/containerd/missing.toml", "file does not exist"},
		{"etc/containerd", "not a regular file: directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			var err error
			runBounded(t, "reading "+tc.name, func() { _, err = w.ReadFileMax(tc.name, hostfs.MaxConfigFile) })
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.name) {
				t.Errorf("ReadFileMax(%s) = %v, want an error naming it with %q", tc.name, err, tc.want)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("ReadFileMax(%s) took %v", tc.name, d)
			}
		})
	}
	if b, err := w.ReadFileMax("/etc/containerd/ok.toml", hostfs.MaxConfigFile); err != nil || string(b) != "version = 2\n" {
		t.Errorf("a regular file: %q, %v", b, err)
	}
	if _, err := w.ReadFileMax("etc/containerd/ok.toml", 4); !errors.Is(err, hostfs.ErrTooLarge) {
		t.Errorf("over a 4-byte cap: %v", err)
	}
}

// TestWriteAtomic: a file is replaced by a rename of a synced temporary
// file; a symlink at its name (to a file outside the directory) is
// replaced, never written through; a failed write leaves neither the
// target changed nor a temporary file behind.
func TestWriteAtomic(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("keep"), 0o644)
	dir := t.TempDir()
	os.Symlink(outside, filepath.Join(dir, "linked"))
	os.WriteFile(filepath.Join(dir, "plain"), []byte("old"), 0o600)
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"linked", "plain", "new"} {
		if err := hostfs.WriteAtomic(hostfs.RootFS(r), name, []byte("berth"), 0o644); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v %v, want a regular file", name, fi, err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, name)); string(b) != "berth" {
			t.Errorf("%s = %q", name, b)
		}
	}
	if b, _ := os.ReadFile(outside); string(b) != "keep" {
		t.Errorf("written through the link: %q", b)
	}
	if err := hostfs.WriteAtomic(hostfs.RootFS(r), "nodir/x", []byte("berth"), 0o644); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	os.WriteFile(filepath.Join(dir, "adir/x"), nil, 0o644)
	if err := hostfs.WriteAtomic(hostfs.RootFS(r), "adir", []byte("berth"), 0o644); err == nil {
		t.Error("a rename over a directory succeeded")
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".berth-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

// TestWritableLock: the lock is exclusive between two opens of one root.
func TestWritableLock(t *testing.T) {
	dir := t.TempDir()
	a, err := hostfs.OpenWritable(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := hostfs.OpenWritable(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	unlock, err := a.Lock()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{})
	go func() {
		u, err := b.Lock()
		if err == nil {
			u()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("a second lock was taken while the first was held")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not handed over")
	}
}
