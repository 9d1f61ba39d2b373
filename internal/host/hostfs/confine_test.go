package hostfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/testkit"
)

// variants are the mechanisms of the confined layer: openat2 or the
// userspace walk, each reopening through /proc/self/fd or by resolving
// again. Every test of the layer runs with each, so the fallbacks are
// exercised on a kernel that has openat2.
var variants = []struct {
	name string
	opt  confineOptions
}{
	{"openat2", confineOptions{}},
	{"walk", confineOptions{walk: true}},
	{"openat2-reresolve", confineOptions{noProc: true}},
	{"walk-reresolve", confineOptions{walk: true, noProc: true}},
}

// forEachVariant runs f with each variant's options, for f to open its
// roots with.
func forEachVariant(t *testing.T, f func(t *testing.T, opt confineOptions)) {
	t.Helper()
	if !haveOpenat2() {
		t.Log("this kernel has no openat2: the openat2 variants run the walk too")
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			f(t, v.opt)
		})
	}
}

// within fails the test if f does not return in d: a hang is a failure,
// not a stuck CI job. No assertion is made on speed.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %s", what, d)
	}
}

// mkTree writes files (content), symlinks ("-> target") and directories
// (trailing "/") under dir.
func mkTree(t testing.TB, dir string, entries map[string]string) {
	t.Helper()
	for name, v := range entries {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch {
		case strings.HasSuffix(name, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(v, "-> "):
			err = os.Symlink(strings.TrimPrefix(v, "-> "), p)
		default:
			err = os.WriteFile(p, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// mkSpecial makes a FIFO, a unix socket and a character device like
// /dev/zero (1,5) under dir; the tests run as root, as CI does.
func mkSpecial(t testing.TB, fifo, sock, chr string) {
	t.Helper()
	if fifo != "" {
		if err := unix.Mkfifo(fifo, 0o644); err != nil {
			t.Fatalf("mkfifo: %v", err)
		}
	}
	if sock != "" {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
		if err != nil {
			t.Fatalf("unix socket: %v", err)
		}
		l.SetUnlinkOnClose(false)
		l.Close()
	}
	if chr != "" {
		testkit.NeedsRoot(t, "mknod of a character device")
		if err := unix.Mknod(chr, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
			t.Fatalf("mknod %s (the tests run as root, as CI does): %v", chr, err)
		}
	}
}

// TestConfinedResolution: every path resolves inside the root as in a
// chroot, with each mechanism.
func TestConfinedResolution(t *testing.T) {
	forEachVariant(t, func(t *testing.T, opt confineOptions) {
		root, outside := t.TempDir(), t.TempDir()
		canary := "canary-" + filepath.Base(outside)
		if err := os.WriteFile(filepath.Join(outside, "canary"), []byte(canary), 0o644); err != nil {
			t.Fatal(err)
		}
		up := strings.Repeat("../", strings.Count(root, "/")+4)
		mkTree(t, root, map[string]string{
			"usr/lib/os-release": "ID=inside\n",
			"etc/os-release":     "-> /usr/lib/os-release",
			"etc/abs-out":        "-> " + filepath.Join(outside, "canary"),
			"etc/rel-out":        "-> " + up + strings.TrimPrefix(outside, "/") + "/canary",
			"etc/dotdot":         "-> ../../../../../usr/lib/os-release",
			"etc/conf/":          "",
			"lib":                "-> usr/lib",
			"loop1":              "-> loop2",
			"loop2":              "-> loop1",
			"self":               "-> .",
			"updir":              "-> ..",
			"out":                "-> " + outside,
			"zero":               "-> /dev/zero",
			"zero-up":            "-> " + up + "dev/zero",
			"dangling":           "-> /nowhere",
			"trail":              "-> usr/lib/os-release/",
			"dev/":               "",
		})
		mkSpecial(t, filepath.Join(root, "fifo"), filepath.Join(root, "sock"), filepath.Join(root, "dev/zero"))
		big := filepath.Join(root, "big")
		if err := os.WriteFile(big, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(big, 1<<30); err != nil {
			t.Fatal(err)
		}
		c, err := newConfinedFS(root, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		t.Logf("resolver: %s", c.resolver())

		tests := []struct {
			name    string
			want    string // content; "" with wantErr
			wantErr error
		}{
			{"usr/lib/os-release", "ID=inside\n", nil},
			{"etc/os-release", "ID=inside\n", nil},
			{"etc/dotdot", "ID=inside\n", nil},
			{"lib/os-release", "ID=inside\n", nil},
			{"self/self/self/usr/lib/os-release", "ID=inside\n", nil},
			{"updir/updir/usr/lib/os-release", "ID=inside\n", nil},
			{"etc/abs-out", "", fs.ErrNotExist},
			{"etc/rel-out", "", fs.ErrNotExist},
			{"out/canary", "", fs.ErrNotExist},
			{"dangling", "", fs.ErrNotExist},
			{"loop1", "", syscall.ELOOP},
			{"trail", "", syscall.ENOTDIR},
			{"usr/lib/os-release/x", "", syscall.ENOTDIR},
			{"etc/conf", "", syscall.EISDIR},
			{"fifo", "", ErrNotRegular},
			{"sock", "", ErrNotRegular},
			{"zero", "", ErrNotRegular},
			{"zero-up", "", ErrNotRegular},
			{"dev/zero", "", ErrNotRegular},
			{"big", "", ErrTooLarge},
			{"/etc/passwd", "", fs.ErrInvalid},
			{"../x", "", fs.ErrInvalid},
		}
		for _, tt := range tests {
			var b []byte
			var err error
			within(t, time.Minute, "ReadFile("+tt.name+")", func() { b, err = c.ReadFile(tt.name) })
			if bytes.Contains(b, []byte(canary)) {
				t.Fatalf("ReadFile(%q) read the canary outside the root", tt.name)
			}
			switch {
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("ReadFile(%q) = %q, %v; want %v", tt.name, b, err, tt.wantErr)
			case tt.wantErr == nil && (err != nil || string(b) != tt.want):
				t.Errorf("ReadFile(%q) = %q, %v; want %q", tt.name, b, err, tt.want)
			}
			// Open refuses what ReadFile refuses, directories aside.
			var f fs.File
			within(t, time.Minute, "Open("+tt.name+")", func() { f, err = c.Open(tt.name) })
			if err == nil {
				got, rerr := io.ReadAll(f)
				f.Close()
				if bytes.Contains(got, []byte(canary)) {
					t.Fatalf("Open(%q) read the canary outside the root", tt.name)
				}
				if tt.wantErr == nil && (rerr != nil || string(got) != tt.want) {
					t.Errorf("Open(%q) read %q, %v", tt.name, got, rerr)
				}
				if tt.wantErr != nil && !errors.Is(tt.wantErr, syscall.EISDIR) {
					t.Errorf("Open(%q) opened; want %v", tt.name, tt.wantErr)
				}
			} else if tt.wantErr == nil {
				t.Errorf("Open(%q): %v", tt.name, err)
			}
		}

		// The kinds are named.
		_, err = c.ReadFile("fifo")
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.Kind != "FIFO" {
			t.Errorf("fifo: %v, want a NotRegularError FIFO", err)
		}
		_, err = c.ReadFile("zero")
		if !errors.As(err, &nr) || nr.Kind != "character device" {
			t.Errorf("zero: %v, want a NotRegularError character device", err)
		}
		_, err = c.ReadFile("big")
		var tl *TooLargeError
		if !errors.As(err, &tl) || tl.Limit != DefaultMaxFile || !strings.Contains(err.Error(), "larger than 16777216 bytes") {
			t.Errorf("big: %v", err)
		}

		// Stat and Lstat of anything, nothing opened; links read as is.
		if fi, err := c.Stat("zero"); err != nil || fi.Mode()&fs.ModeCharDevice == 0 || fi.Name() != "zero" {
			t.Errorf("Stat(zero) = %v, %v; want the root's character device", fi, err)
		}
		if fi, err := c.Stat("fifo"); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
			t.Errorf("Stat(fifo) = %v, %v", fi, err)
		}
		if fi, err := c.Lstat("etc/abs-out"); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Lstat(etc/abs-out) = %v, %v", fi, err)
		}
		if _, err := c.Stat("etc/abs-out"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat(etc/abs-out) = %v, want not exist (inside the root)", err)
		}
		if fi, err := c.Stat("out"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat(out) = %v, %v; want not exist (inside the root)", fi, err)
		}
		if tg, err := c.ReadLink("etc/os-release"); err != nil || tg != "/usr/lib/os-release" {
			t.Errorf("ReadLink = %q, %v; want the text as is", tg, err)
		}
		if tg, err := c.ReadLink("lib/os-release"); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("ReadLink of a file = %q, %v; want EINVAL", tg, err)
		}
		// Listings, through links, typed, and never outside.
		ents, err := c.ReadDir("self/etc")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name()+":"+e.Type().String())
		}
		if got := strings.Join(names, " "); got != "abs-out:L--------- conf:d--------- dotdot:L--------- os-release:L--------- rel-out:L---------" {
			t.Errorf("ReadDir(self/etc) = %s", got)
		}
		if fi, err := ents[1].Info(); err != nil || !fi.IsDir() || fi.Name() != "conf" {
			t.Errorf("Info = %v, %v", fi, err)
		}
		if _, err := c.ReadDir("out"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadDir(out) = %v, want not exist", err)
		}
		if _, err := c.ReadDir("fifo"); !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("ReadDir(fifo) = %v, want ENOTDIR", err)
		}
		if _, err := c.ReadDir("loop1"); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("ReadDir(loop1) = %v, want ELOOP", err)
		}
		// Raw opens are confined and regular too.
		if f, err := c.OpenRaw("etc/os-release"); err != nil {
			t.Errorf("OpenRaw: %v", err)
		} else {
			f.Close()
		}
		for _, n := range []string{"etc/rel-out", "fifo", "zero"} {
			if f, err := c.OpenRaw(n); err == nil {
				f.Close()
				t.Errorf("OpenRaw(%s) opened", n)
			}
		}
	})
}

// TestReadCaps: a read stops at its cap even where the size says nothing
// (procfs files report 0), and a source may declare its own.
func TestReadCaps(t *testing.T) {
	forEachVariant(t, func(t *testing.T, opt confineOptions) {
		l, err := newLiveWith("/", opt)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ReadFileLimit(l.FS(), "proc/self/status", 1<<20)
		if err != nil || !bytes.Contains(b, []byte("Name:")) {
			t.Fatalf("proc/self/status: %q %v", b, err)
		}
		if _, err := ReadFileLimit(l.FS(), "proc/self/status", 64); !errors.Is(err, ErrTooLarge) {
			t.Errorf("proc/self/status capped at 64 bytes: %v, want ErrTooLarge", err)
		}
		// Through the recorder too, which records the refusal.
		rec := NewRecorder(l)
		if _, err := ReadFileLimit(rec.FS(), "proc/self/status", 64); !errors.Is(err, ErrTooLarge) {
			t.Errorf("recorder: %v, want ErrTooLarge", err)
		}
		// Magic links of procfs are refused by both resolvers: they would
		// leave any root.
		if _, err := l.FS().ReadFile("proc/self/root/etc/hostname"); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("proc/self/root/...: %v, want ELOOP (magic link)", err)
		}
		if _, err := l.FS().ReadFile("proc/self/cwd/x"); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("proc/self/cwd/...: %v, want ELOOP (magic link)", err)
		}
		if b, err := l.FS().ReadFile("proc/self/comm"); err != nil || len(b) == 0 {
			t.Errorf("proc/self/comm (proc/self is a plain link): %q %v", b, err)
		}
		// A stream through Open stops at the cap too.
		dir := t.TempDir()
		mkTree(t, dir, map[string]string{"f": strings.Repeat("x", 100)})
		d, err := openDirWith(dir, opt)
		if err != nil {
			t.Fatal(err)
		}
		d.cfs.maxFile = 64
		f, err := d.cfs.Open("f")
		if !errors.Is(err, ErrTooLarge) {
			t.Errorf("Open of a file over the cap: %v", err)
		}
		if err == nil {
			f.Close()
		}
		f = &regFile{f: must(os.Open(filepath.Join(dir, "f"))), limit: 64}
		if b, err := io.ReadAll(f); !errors.Is(err, ErrTooLarge) || len(b) != 64 {
			t.Errorf("stream past the cap: %d bytes, %v", len(b), err)
		}
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestRootIsFIFO: a FIFO (or socket) given as the root is refused at once
// by every way of opening a root.
func TestRootIsFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo, sock := filepath.Join(dir, "fifo"), filepath.Join(dir, "sock")
	mkSpecial(t, fifo, sock, "")
	for _, p := range []string{fifo, sock} {
		for _, live := range []bool{false, true} {
			within(t, time.Minute, "Open("+p+")", func() {
				_, c, err := Open(p, live)
				c()
				if err == nil || !strings.Contains(err.Error(), "neither a directory nor a snapshot file") {
					t.Errorf("Open(%s, live=%v) = %v", p, live, err)
				}
			})
		}
		within(t, time.Minute, "OpenDir", func() {
			if _, err := OpenDir(p); err == nil {
				t.Errorf("OpenDir(%s) accepted", p)
			}
		})
		within(t, time.Minute, "NewLive", func() {
			if _, err := NewLive(p); err == nil {
				t.Errorf("NewLive(%s) accepted", p)
			}
		})
		within(t, time.Minute, "OpenSnapshot", func() {
			_, c, err := OpenSnapshot(p, SnapshotLimits{})
			c()
			if !errors.Is(err, ErrBadSnapshot) {
				t.Errorf("OpenSnapshot(%s) = %v, want ErrBadSnapshot", p, err)
			}
		})
	}
}

// TestResolversAgree compares the two resolvers on every path of every
// fixture host, and on a maze of links: the same file, or the same error.
func TestResolversAgree(t *testing.T) {
	maze := t.TempDir()
	mkTree(t, maze, map[string]string{
		"a/b/c/file": "deep",
		"a/up":       "-> ../..",
		"a/b/abs":    "-> /a/b/c",
		"a/b/rel":    "-> c/../c/./file",
		"a/b/far":    "-> ../../../../../../a/b/c/file",
		"x":          "-> a/b/../b/abs/file",
		"y":          "-> x/",
		"z":          "-> a/up/a/up/a/b/rel",
		"w":          "-> /x/..",
		"l1":         "-> l2/file",
		"l2":         "-> l1",
		"dots":       "-> ./././a/./b",
	})
	roots := []string{maze}
	hosts, _ := filepath.Glob("../../../testdata/hosts/*")
	for _, h := range hosts {
		if st, err := os.Stat(h); err == nil && st.IsDir() {
			roots = append(roots, h)
		}
	}
	if len(roots) < 10 {
		t.Fatalf("found %d fixture hosts", len(roots))
	}
	for _, dir := range roots {
		var paths []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil {
				rel, _ := filepath.Rel(dir, p)
				paths = append(paths, filepath.ToSlash(rel))
			}
			return nil
		})
		paths = append(paths, "y/..", "z/a", "nope/x")
		var results [2]map[string]string
		for i, opt := range []confineOptions{{}, {walk: true, noProc: true}} {
			c, err := newConfinedFS(dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			results[i] = map[string]string{}
			for _, p := range paths {
				results[i][p] = describe(c, p)
				if d := handleDiff(c, p); d != "" {
					t.Errorf("%s: %s (%s): %s", dir, p, c.resolver(), d)
				}
			}
			c.close()
		}
		for _, p := range paths {
			if dir == maze && testing.Verbose() {
				t.Logf("%s: %s", p, results[0][p])
			}
			if a, b := results[0][p], results[1][p]; a != b {
				t.Errorf("%s: %s: openat2 %s, walk %s", dir, p, a, b)
			}
		}
	}
}

// describe sums up what each operation of the root gives for p.
func describe(c *confinedFS, p string) string {
	id := func(fi fs.FileInfo, err error) string {
		if err != nil {
			return errText(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return fmt.Sprintf("%s@%d:%d", fi.Mode(), st.Dev, st.Ino)
	}
	var parts []string
	parts = append(parts, "stat="+id(c.Stat(p)), "lstat="+id(c.Lstat(p)))
	if t, err := c.ReadLink(p); err != nil {
		parts = append(parts, "readlink="+errText(err))
	} else {
		parts = append(parts, "readlink="+t)
	}
	if b, err := c.ReadFile(p); err != nil {
		parts = append(parts, "read="+errText(err))
	} else {
		parts = append(parts, "read="+string(b[:min(len(b), 32)]))
	}
	if ents, err := c.ReadDir(p); err != nil {
		parts = append(parts, "readdir="+errText(err))
	} else {
		parts = append(parts, fmt.Sprintf("readdir=%d", len(ents)))
	}
	return strings.Join(parts, " ")
}

// handleDiff says how reading p through a handle of its directory
// differs from reading p the general way ("" when it does not): the same
// bytes or the same error, naming the same path, are wanted.
func handleDiff(c *confinedFS, p string) string {
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	}
	h := OpenDirHandle(c, dir)
	defer h.Close()
	var diffs []string
	if got, want := result(h.ReadFile(name)), result(c.ReadFile(p)); got != want {
		diffs = append(diffs, fmt.Sprintf("ReadFile: handle %.100q, general way %.100q", got, want))
	}
	tg, err := h.ReadLink(name)
	got := result([]byte(tg), err)
	tg, err = c.ReadLink(p)
	if want := result([]byte(tg), err); got != want {
		diffs = append(diffs, fmt.Sprintf("ReadLink: handle %q, general way %q", got, want))
	}
	return strings.Join(diffs, "; ")
}

func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// TestPseudoFSReads compares reads below the live root's sys and proc,
// which take the sysfs/procfs fast path when they are those file systems,
// with the general way: the same bytes or the same error, magic links
// refused, a file system mounted below (cgroup2 on sys/fs/cgroup) read
// the general way. A fixture's plain sys directory never takes it.
func TestPseudoFSReads(t *testing.T) {
	var mounted [len(pseudoTops)]bool
	for i, top := range pseudoTops {
		var st unix.Statfs_t
		mounted[i] = unix.Statfs("/"+top.name, &st) == nil && int64(st.Type) == top.magic
	}
	t.Logf("sysfs at /sys: %v, procfs at /proc: %v", mounted[0], mounted[1])
	paths := []string{
		"proc/sys/kernel/osrelease", "proc/cmdline", "proc/sys", "proc/nope",
		"proc/self/fd/0", "proc/1/root/etc/os-release", "proc/self/cwd/x",
		"sys/kernel", "sys/nope/x", "sys/devices/system/cpu/online",
		"sys/kernel/mm/transparent_hugepage/enabled", "sys/fs/cgroup/cgroup.controllers",
		"sys/module/kvm/parameters/nx_huge_pages", "sys/bus/pci/devices",
		// Binary attributes, read a page at a time (DSDT is larger).
		"sys/firmware/acpi/tables/DSDT", "sys/firmware/acpi/tables/FACP",
		"proc/modules",
	}
	if devs, err := os.ReadDir("/sys/bus/pci/devices"); err == nil && len(devs) > 0 {
		paths = append(paths, "sys/bus/pci/devices/"+devs[0].Name()+"/config",
			"sys/bus/pci/devices/"+devs[0].Name()+"/vendor")
	}
	read := func(opt confineOptions) (map[string]string, *confinedFS) {
		c, err := newConfinedFS("/", opt)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		// The bytes are kept until every path has been read, so that a
		// result sharing memory with a later read would show.
		kept := map[string][]byte{}
		for _, p := range paths {
			b, err := c.ReadFile(p)
			if err != nil {
				out[p] = "error: " + err.Error()
			} else {
				kept[p] = b
			}
		}
		for p, b := range kept {
			out[p] = string(b)
		}
		return out, c
	}
	fast, c := read(confineOptions{})
	defer c.close()
	general, g := read(confineOptions{noPseudo: true})
	g.close()
	for _, p := range paths {
		if fast[p] != general[p] {
			t.Errorf("%s: fast path %q, general way %q", p, fast[p], general[p])
		}
	}
	for _, p := range []string{"proc/self/fd/0", "proc/1/root/etc/os-release"} {
		// ELOOP, or EACCES before the link is reached.
		if !strings.HasPrefix(fast[p], "error: ") {
			t.Errorf("%s: magic link followed: %q", p, fast[p])
		}
	}
	for i, top := range pseudoTops {
		if got := c.pseudoAnchorFd(i) >= 0; got != mounted[i] && haveOpenat2() {
			t.Errorf("%s: anchored %v, want %v (the kernel's pseudo file system is there)", top.name, got, mounted[i])
		}
	}
	if mounted[1] && haveOpenat2() {
		if _, ok, err := c.readPseudo("proc/sys/kernel/osrelease", 4096); !ok || err != nil {
			t.Errorf("proc/sys/kernel/osrelease: fast path ok=%v err=%v, want it taken", ok, err)
		}
	}
	var sysSt, cgSt unix.Stat_t
	if mounted[0] && haveOpenat2() && unix.Stat("/sys", &sysSt) == nil && unix.Stat("/sys/fs/cgroup", &cgSt) == nil && sysSt.Dev != cgSt.Dev {
		if _, ok, _ := c.readPseudo("sys/fs/cgroup/cgroup.controllers", 4096); ok {
			t.Error("sys/fs/cgroup/cgroup.controllers: read through the sysfs anchor across a mount")
		}
	}

	// A fixture's sys is a plain directory.
	dir := t.TempDir()
	mkTree(t, dir, map[string]string{"sys/kernel/x": "plain", "proc/cmdline": "quiet"})
	fc, err := newConfinedFS(dir, confineOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.close()
	for _, p := range []string{"sys/kernel/x", "proc/cmdline"} {
		if _, ok, _ := fc.readPseudo(p, 4096); ok {
			t.Errorf("%s of a plain directory root took the pseudo file-system path", p)
		}
		if b, err := fc.ReadFile(p); err != nil || (string(b) != "plain" && string(b) != "quiet") {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
}

// TestFileReader checks that the read of the end is saved only after a
// short first read that is known to be the whole file (a sysfs attribute
// of at most a page, or the size fstat gave), and that other files are
// read to their end.
func TestFileReader(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name        string
		size, limit int
		statSize    int64 // what the reader is told fstat said
		sysfs       bool
		reads       int
	}{
		{name: "sysfs short", size: 10, limit: 1 << 20, sysfs: true, reads: 1},
		{name: "sysfs page-1", size: 4095, limit: 1 << 20, sysfs: true, reads: 1},
		{name: "sysfs full page", size: 4096, limit: 1 << 20, sysfs: true, reads: 2},
		{name: "sysfs binary", size: 9000, limit: 1 << 20, sysfs: true, reads: 4},
		{name: "sysfs empty", size: 0, limit: 1 << 20, sysfs: true, reads: 1},
		{name: "sysfs too large", size: 100, limit: 50, sysfs: true, reads: 1},
		{name: "sized", size: 300, limit: 1 << 20, statSize: 300, reads: 1},
		{name: "sized large", size: 70000, limit: 1 << 20, statSize: 70000, reads: 1},
		// The buffer has room for the size and one byte: the first
		// read fills it, the second reads the rest, the third the end.
		{name: "grew after fstat", size: 300, limit: 1 << 20, statSize: 200, reads: 3},
		{name: "sized exactly", size: 200, limit: 1 << 20, statSize: 200, reads: 1},
		{name: "shrank after fstat", size: 100, limit: 1 << 20, statSize: 200, reads: 2},
		{name: "proc-like size 0", size: 300, limit: 1 << 20, statSize: 0, reads: 2},
		{name: "sysfs-like 4096", size: 300, limit: 1 << 20, statSize: 4096, reads: 2},
	} {
		p := filepath.Join(dir, tc.name)
		want := bytes.Repeat([]byte("x"), tc.size)
		if err := os.WriteFile(p, want, 0o644); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(p, unix.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		r := &fileReader{fd: fd, size: tc.statSize, sysfs: tc.sysfs}
		var got []byte
		if tc.sysfs {
			got, err = readLimitedCap(r, "f", sysfsPage, int64(tc.limit))
		} else {
			got, err = readLimited(r, "f", tc.statSize, int64(tc.limit))
		}
		unix.Close(fd)
		switch {
		case tc.size > tc.limit:
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s: %v, want too large", tc.name, err)
			}
		case err != nil || !bytes.Equal(got, want):
			t.Errorf("%s: %d bytes, %v", tc.name, len(got), err)
		}
		if r.reads != tc.reads {
			t.Errorf("%s: %d reads, want %d", tc.name, r.reads, tc.reads)
		}
		// A file no larger than its size is read into that size and a
		// byte: what is kept of a read is not several times the file.
		if !tc.sysfs && tc.statSize > 0 && int64(tc.size) <= tc.statSize && int64(cap(got)) > tc.statSize+1 {
			t.Errorf("%s: read into %d bytes, want at most %d", tc.name, cap(got), tc.statSize+1)
		}
	}
}

// TestReadDirAgreesWithOS lists directories of many entries (several
// getdents buffers, names of every length up to the limit, every type)
// and the live /sys and /proc, on each variant, and holds the names,
// their order and their types to os.ReadDir's.
func TestReadDirAgreesWithOS(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.Mkdir(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		name := fmt.Sprintf("%04x:%s", i*7919%65536, strings.Repeat("n", i%240))
		p := filepath.Join(big, name)
		var err error
		switch i % 5 {
		case 0, 1:
			err = os.WriteFile(p, nil, 0o644)
		case 2:
			err = os.Mkdir(p, 0o755)
		case 3:
			err = os.Symlink("../"+name, p)
		case 4:
			err = syscall.Mkfifo(p, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	forEachVariant(t, func(t *testing.T, opt confineOptions) {
		for _, tc := range []struct{ root, name string }{
			{dir, "big"}, {dir, "empty"}, {"/", "sys/bus/pci/devices"}, {"/", "proc/self"}, {"/", "sys/kernel"},
		} {
			c, err := newConfinedFS(tc.root, opt)
			if err != nil {
				t.Fatal(err)
			}
			want, werr := os.ReadDir(filepath.Join(tc.root, tc.name))
			got, gerr := c.ReadDir(tc.name)
			c.close()
			if werr != nil || gerr != nil {
				t.Fatalf("%s: os.ReadDir %v, ReadDir %v", tc.name, werr, gerr)
			}
			if tc.name == "empty" && got != nil {
				t.Errorf("empty: %v, want nil", got)
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %d entries, want %d", tc.name, len(got), len(want))
			}
			for i := range want {
				if got[i].Name() != want[i].Name() || got[i].Type() != want[i].Type() || got[i].IsDir() != want[i].IsDir() {
					t.Fatalf("%s[%d]: %s %v, want %s %v", tc.name, i, got[i].Name(), got[i].Type(), want[i].Name(), want[i].Type())
				}
			}
		}
	})
}
