package hostfs

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// handleNames are the names every handle test reads from a directory:
// single components of each kind, and names that are not one component
// (handed to the general way, which reads or refuses them).
var handleNames = []string{
	"file", "empty", "link", "abs", "up", "out", "esc", "sub", "fifo", "sock",
	"zero", "zerolink", "dangling", "loop1", "big", "nope", "marked", "markedlink",
	"sub/f", "esc/etc/target", "../x", "../../x", "..", ".", "", "a\x00b", "/etc/target", "sub/", "nope/x",
}

// handleTree makes a root whose directory d (reached also as the
// symlinks dlink and dabs) holds a file of each kind, links inside, out
// and up, and a canary beside the root; it returns the root and the
// canary's content.
func handleTree(t *testing.T) (root, canary string) {
	t.Helper()
	base := t.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	canary = "canary-" + filepath.Base(base)
	mkTree(t, outside, map[string]string{"canary": canary, "etc/target": canary})
	// Beside the root too, where "../x" from the root would lead.
	mkTree(t, base, map[string]string{"x": canary})
	up := strings.Repeat("../", strings.Count(root, "/")+4)
	mkTree(t, root, map[string]string{
		"d/file":       "content\n",
		"d/empty":      "",
		"d/link":       "-> file",
		"d/abs":        "-> /etc/target",
		"d/up":         "-> " + up + "etc/target",
		"d/out":        "-> " + filepath.Join(outside, "canary"),
		"d/esc":        "-> ../../..",
		"d/sub/f":      "deep",
		"d/zerolink":   "-> /dev/zero",
		"d/dangling":   "-> /nowhere",
		"d/loop1":      "-> loop2",
		"d/loop2":      "-> loop1",
		"d/marked":     "abc",
		"d/markedlink": "-> marked",
		"etc/target":   "target\n",
		"notdir":       "x",
		"dlink":        "-> d",
		"dabs":         "-> /d",
		"dout":         "-> " + outside,
		"dev/":         "",
	})
	mkSpecial(t, filepath.Join(root, "d/fifo"), filepath.Join(root, "d/sock"), filepath.Join(root, "d/zero"))
	mkSpecial(t, "", "", filepath.Join(root, "dev/zero"))
	big := filepath.Join(root, "d/big")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, DefaultMaxFile+1); err != nil {
		t.Fatal(err)
	}
	return root, canary
}

// result sums up a read for comparison: the bytes or the whole error
// text, which names the path.
func result(b []byte, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "bytes: " + string(b)
}

// TestDirHandle: every read through a handle gives what the general way
// gives for dir/name (bytes, or the same error naming the same path), on
// directories reached directly and through links, with each mechanism;
// and what it gives is the root's, never outside it.
func TestDirHandle(t *testing.T) {
	forEachVariant(t, func(t *testing.T, opt confineOptions) {
		root, canary := handleTree(t)
		c, err := newConfinedFS(root, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		for _, dir := range []string{"d", "dlink", "dabs"} {
			h, err := c.OpenDirHandle(dir)
			if err != nil {
				t.Fatalf("OpenDirHandle(%s): %v", dir, err)
			}
			for _, name := range handleNames {
				full := joinDir(dir, name)
				var got, want string
				within(t, time.Minute, "ReadFile("+full+")", func() {
					got = result(h.ReadFile(name))
					want = result(c.ReadFile(full))
				})
				if got != want {
					t.Errorf("%s: handle ReadFile(%q) = %q, general way %q", dir, name, got, want)
				}
				if strings.Contains(got, canary) {
					t.Errorf("%s: ReadFile(%q) read outside the root: %q", dir, name, got)
				}
				got, want = result(h.ReadFileLimit(name, 3)), result(c.ReadFileLimit(full, 3))
				if got != want {
					t.Errorf("%s: handle ReadFileLimit(%q, 3) = %q, general way %q", dir, name, got, want)
				}
				tg, err := h.ReadLink(name)
				got = result([]byte(tg), err)
				tg, err = c.ReadLink(full)
				if want = result([]byte(tg), err); got != want {
					t.Errorf("%s: handle ReadLink(%q) = %q, general way %q", dir, name, got, want)
				}
			}
			// What each read must be, not only the same as the general
			// way's.
			for _, tt := range []struct {
				name, want string
				wantErr    error
			}{
				{"file", "content\n", nil},
				{"link", "content\n", nil},
				{"abs", "target\n", nil},
				{"up", "target\n", nil},
				{"esc/etc/target", "target\n", nil},
				{"sub/f", "deep", nil},
				{"empty", "", nil},
				{"out", "", fs.ErrNotExist},
				{"dangling", "", fs.ErrNotExist},
				{"nope", "", fs.ErrNotExist},
				{"loop1", "", syscall.ELOOP},
				{"sub", "", syscall.EISDIR},
				{"esc", "", syscall.EISDIR},
				{"fifo", "", ErrNotRegular},
				{"sock", "", ErrNotRegular},
				{"zero", "", ErrNotRegular},
				{"zerolink", "", ErrNotRegular},
				{"big", "", ErrTooLarge},
				{"../x", "", fs.ErrInvalid},
				{"../../x", "", fs.ErrInvalid},
				{"..", "", fs.ErrInvalid},
				{".", "", fs.ErrInvalid},
				{"", "", fs.ErrInvalid},
				{"a\x00b", "", fs.ErrInvalid},
				{"/etc/target", "", fs.ErrInvalid},
			} {
				b, err := h.ReadFile(tt.name)
				switch {
				case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
					t.Errorf("%s: ReadFile(%q) = %q, %v; want %v", dir, tt.name, b, err, tt.wantErr)
				case tt.wantErr == nil && (err != nil || string(b) != tt.want):
					t.Errorf("%s: ReadFile(%q) = %q, %v; want %q", dir, tt.name, b, err, tt.want)
				}
				var pe *fs.PathError
				if err != nil && (!errors.As(err, &pe) || pe.Path != joinDir(dir, tt.name)) {
					t.Errorf("%s: ReadFile(%q): %v, want an error naming %s", dir, tt.name, err, joinDir(dir, tt.name))
				}
			}
			var nr *NotRegularError
			if _, err := h.ReadFile("fifo"); !errors.As(err, &nr) || nr.Kind != "FIFO" {
				t.Errorf("%s: fifo: %v, want a NotRegularError FIFO", dir, err)
			}
			if _, err := h.ReadFile("zero"); !errors.As(err, &nr) || nr.Kind != "character device" {
				t.Errorf("%s: zero: %v, want a NotRegularError character device", dir, err)
			}
			if tg, err := h.ReadLink("abs"); err != nil || tg != "/etc/target" {
				t.Errorf("%s: ReadLink(abs) = %q, %v; want the text as is", dir, tg, err)
			}
			if tg, err := h.ReadLink("file"); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "readlink "+dir+"/file:") {
				t.Errorf("%s: ReadLink(file) = %q, %v; want EINVAL naming %s/file", dir, tg, err, dir)
			}
			if _, err := h.ReadLink("nope"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), dir+"/nope") {
				t.Errorf("%s: ReadLink(nope) = %v; want not exist naming %s/nope", dir, err, dir)
			}
			if err := h.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if _, err := h.ReadFile("file"); !errors.Is(err, fs.ErrClosed) {
				t.Errorf("ReadFile after Close: %v, want ErrClosed", err)
			}
			if _, err := h.ReadLink("abs"); !errors.Is(err, fs.ErrClosed) {
				t.Errorf("ReadLink after Close: %v, want ErrClosed", err)
			}
			if err := h.Close(); !errors.Is(err, fs.ErrClosed) {
				t.Errorf("second Close: %v, want ErrClosed", err)
			}
		}

		// Handles open on directories only, resolved inside the root;
		// the handle of a directory that does not open reads dir/name the
		// general way.
		for _, tt := range []struct {
			dir     string
			wantErr error
		}{
			{"notdir", syscall.ENOTDIR},
			{"d/fifo", syscall.ENOTDIR},
			{"d/zero", syscall.ENOTDIR},
			{"dout", fs.ErrNotExist},
			{"nope", fs.ErrNotExist},
			{"../d", fs.ErrInvalid},
			{"/d", fs.ErrInvalid},
			{"d/", fs.ErrInvalid},
		} {
			var err error
			within(t, time.Minute, "OpenDirHandle("+tt.dir+")", func() {
				var h DirHandle
				if h, err = c.OpenDirHandle(tt.dir); err == nil {
					h.Close()
				}
			})
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("OpenDirHandle(%q) = %v, want %v", tt.dir, err, tt.wantErr)
			}
			h := OpenDirHandle(c, tt.dir)
			if _, ok := h.(pathDir); !ok {
				t.Errorf("OpenDirHandle(c, %q) = %T, want the general way's", tt.dir, h)
			}
			for _, name := range []string{"file", "x"} {
				if got, want := result(h.ReadFile(name)), result(c.ReadFile(joinDir(tt.dir, name))); got != want {
					t.Errorf("OpenDirHandle(c, %q).ReadFile(%q) = %q, general way %q", tt.dir, name, got, want)
				}
			}
			h.Close()
		}
		// The root itself.
		h, err := c.OpenDirHandle(".")
		if err != nil {
			t.Fatal(err)
		}
		if b, err := h.ReadFile("notdir"); err != nil || string(b) != "x" {
			t.Errorf("root handle ReadFile(notdir) = %q, %v", b, err)
		}
		if _, err := h.ReadFile("nope"); err == nil || !strings.Contains(err.Error(), "open nope:") {
			t.Errorf("root handle ReadFile(nope) = %v, want an error naming nope", err)
		}
		h.Close()
	})
}

// TestDirHandleFIFONeverOpened: a FIFO read through a handle is refused
// without being opened: a writer blocked in open(2) until a reader comes
// is still blocked after the read.
func TestDirHandleFIFONeverOpened(t *testing.T) {
	forEachVariant(t, func(t *testing.T, opt confineOptions) {
		root := t.TempDir()
		mkTree(t, root, map[string]string{"d/": "", "d/link": "-> fifo"})
		fifo := filepath.Join(root, "d/fifo")
		mkSpecial(t, fifo, "", "")
		c, err := newConfinedFS(root, opt)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		h, err := c.OpenDirHandle("d")
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		opened := make(chan int, 1)
		go func() {
			fd, err := unix.Open(fifo, unix.O_WRONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				opened <- -1
				return
			}
			opened <- fd
		}()
		// Give the writer time to block in open.
		time.Sleep(100 * time.Millisecond)
		for _, name := range []string{"fifo", "link"} {
			within(t, time.Minute, "ReadFile("+name+")", func() {
				if _, err := h.ReadFile(name); !errors.Is(err, ErrNotRegular) {
					t.Errorf("ReadFile(%s) = %v, want ErrNotRegular", name, err)
				}
			})
		}
		select {
		case fd := <-opened:
			t.Errorf("the FIFO was opened for reading (writer's open returned %d)", fd)
			unix.Close(fd)
			return
		case <-time.After(200 * time.Millisecond):
		}
		// Release the writer.
		r, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if fd := <-opened; fd >= 0 {
			unix.Close(fd)
		}
		unix.Close(r)
	})
}

// TestDirHandleSnapshotMarks: files the snapshot's index marks read
// through a handle as through the general way, by name or through a
// link.
func TestDirHandleSnapshotMarks(t *testing.T) {
	file := writeTarGz(t, []tarEntry{
		{name: "d/big.conf", typ: tar.TypeReg, data: "abc"},
		{name: "d/link", typ: tar.TypeSymlink, target: "/d/big.conf"},
		{name: "d/special", typ: tar.TypeReg},
		{name: "d/ok", typ: tar.TypeReg, data: "ok"},
		{name: SnapshotIndex, typ: tar.TypeReg, data: `{"schemaVersion":1,
			"truncated":[{"path":"d/big.conf","kept":3,"size":10}],
			"special":[{"path":"d/special","kind":"FIFO"}]}`},
	})
	forEachVariant(t, func(t *testing.T, opt confineOptions) {
		root, cleanup, err := openSnapshotWith(file, SnapshotLimits{}, opt)
		defer cleanup()
		if err != nil {
			t.Fatal(err)
		}
		fsys := root.FS()
		h := OpenDirHandle(fsys, "d")
		if _, ok := h.(*confinedDir); !ok {
			t.Fatalf("a snapshot's handle is %T, want its own", h)
		}
		defer h.Close()
		var te *TruncatedError
		var nr *NotRegularError
		for _, name := range []string{"big.conf", "link", "special", "ok", "nope"} {
			if got, want := result(h.ReadFile(name)), result(fsys.ReadFile("d/"+name)); got != want {
				t.Errorf("ReadFile(%s) = %q, general way %q", name, got, want)
			}
		}
		for _, name := range []string{"big.conf", "link"} {
			if _, err := h.ReadFile(name); !errors.As(err, &te) || te.Kept != 3 || te.Size != 10 {
				t.Errorf("ReadFile(%s) = %v, want truncated in snapshot (3 of 10 bytes)", name, err)
			}
		}
		if _, err := h.ReadFile("special"); !errors.As(err, &nr) || nr.Kind != "FIFO" {
			t.Errorf("ReadFile(special) = %v, want not a regular file: FIFO", err)
		}
	})
}

// TestDirHandleLive: on the live root, directories of sysfs and procfs
// take the pseudo file systems' direct open (unless the options turn it
// off) and read what the general way reads; a file system mounted below
// sys (cgroup2) and a fixture's plain sys directory do not take it.
func TestDirHandleLive(t *testing.T) {
	var sysfs, procfs bool
	var st unix.Statfs_t
	sysfs = unix.Statfs("/sys", &st) == nil && st.Type == unix.SYSFS_MAGIC
	procfs = unix.Statfs("/proc", &st) == nil && st.Type == unix.PROC_SUPER_MAGIC
	if !sysfs || !procfs {
		t.Fatalf("this test needs the kernel's sysfs at /sys (%v) and procfs at /proc (%v)", sysfs, procfs)
	}
	type dirCase struct {
		dir    string
		names  []string
		links  []string
		pseudo int // the pseudoTops index the handle must take, -1 none
	}
	cases := []dirCase{
		{"sys/devices/system/cpu/cpu0", []string{"uevent", "online", "topology", "subsystem", "nope", "cpufreq/nope", "../x"}, []string{"subsystem", "driver", "uevent", "nope"}, 0},
		{"sys/kernel/mm/transparent_hugepage", []string{"enabled", "defrag", "nope"}, []string{"enabled"}, 0},
		{"proc/sys/kernel", []string{"osrelease", "ostype", "nope", "random"}, []string{"osrelease"}, 1},
		{"proc/self", []string{"root", "cwd", "exe", "nope"}, []string{"exe", "cwd", "nope"}, 1},
	}
	if devs, err := os.ReadDir("/sys/bus/pci/devices"); err == nil && len(devs) > 0 {
		cases = append(cases, dirCase{"sys/bus/pci/devices/" + devs[0].Name(),
			[]string{"uevent", "vendor", "device", "class", "numa_node", "sriov_totalvfs", "iommu_group", "driver", "config"},
			[]string{"iommu_group", "driver", "physfn", "vendor"}, 0})
	} else {
		t.Log("no PCI devices here: sysfs is tested on cpu0 and transparent_hugepage")
	}
	var sysSt, cgSt unix.Stat_t
	if unix.Stat("/sys", &sysSt) == nil && unix.Stat("/sys/fs/cgroup", &cgSt) == nil && sysSt.Dev != cgSt.Dev {
		cases = append(cases, dirCase{"sys/fs/cgroup", []string{"cgroup.controllers", "nope"}, []string{"cgroup.controllers"}, -1})
	}
	opts := []struct {
		name string
		opt  confineOptions
	}{
		{"openat2", confineOptions{}},
		{"walk", confineOptions{walk: true}},
		{"reresolve", confineOptions{noProc: true}},
		{"no-pseudo", confineOptions{noPseudo: true}},
	}
	for _, o := range opts {
		t.Run(o.name, func(t *testing.T) {
			l, err := newLiveWith("/", o.opt)
			if err != nil {
				t.Fatal(err)
			}
			defer l.fsys.close()
			c := l.fsys
			fast := haveOpenat2() && !o.opt.walk && !o.opt.noPseudo
			for _, tc := range cases {
				h := OpenDirHandle(l.FS(), tc.dir)
				d, ok := h.(*confinedDir)
				if !ok {
					t.Fatalf("%s: handle %T, want the root's own", tc.dir, h)
				}
				if want := map[bool]int{true: tc.pseudo, false: -1}[fast]; d.pseudo != want {
					t.Errorf("%s: pseudo %d, want %d", tc.dir, d.pseudo, want)
				}
				for _, name := range tc.names {
					got, want := result(h.ReadFile(name)), result(c.ReadFile(joinDir(tc.dir, name)))
					if got != want {
						t.Errorf("%s: handle ReadFile(%q) = %.200q, general way %.200q", tc.dir, name, got, want)
					}
				}
				for _, name := range tc.links {
					tg, err := h.ReadLink(name)
					got := result([]byte(tg), err)
					tg, err = c.ReadLink(joinDir(tc.dir, name))
					if want := result([]byte(tg), err); got != want {
						t.Errorf("%s: handle ReadLink(%q) = %q, general way %q", tc.dir, name, got, want)
					}
				}
				h.Close()
			}
			// Magic links are refused through a handle too.
			h := OpenDirHandle(l.FS(), "proc/self")
			for _, name := range []string{"root", "cwd"} {
				if _, err := h.ReadFile(name); err == nil {
					t.Errorf("proc/self/%s read through a magic link", name)
				}
			}
			h.Close()
			// The uevent of cpu0 must be read, and whole.
			h = OpenDirHandle(l.FS(), "sys/devices/system/cpu/cpu0")
			b, err := h.ReadFile("uevent")
			h.Close()
			want, werr := os.ReadFile("/sys/devices/system/cpu/cpu0/uevent")
			if err != nil || werr != nil || !bytes.Equal(b, want) {
				t.Errorf("cpu0/uevent = %q, %v; os.ReadFile %q, %v", b, err, want, werr)
			}
		})
	}

	// A fixture's sys is a plain directory: no direct opens.
	dir := t.TempDir()
	mkTree(t, dir, map[string]string{"sys/kernel/x": "plain", "proc/sys/kernel/osrelease": "1.2.3"})
	for _, live := range []bool{false, true} {
		var fsys FS
		if live {
			l, err := NewLive(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l.fsys.close()
			fsys = l.FS()
		} else {
			d, err := OpenDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer d.cfs.close()
			fsys = d.FS()
		}
		for _, p := range []string{"sys/kernel/x", "proc/sys/kernel/osrelease"} {
			h := OpenDirHandle(fsys, filepath.Dir(p))
			if d, ok := h.(*confinedDir); !ok || d.pseudo != -1 {
				t.Errorf("live=%v %s: handle %T %+v, want the root's own without the pseudo path", live, p, h, h)
			}
			if b, err := h.ReadFile(filepath.Base(p)); err != nil || (string(b) != "plain" && string(b) != "1.2.3") {
				t.Errorf("live=%v %s: %q, %v", live, p, b, err)
			}
			h.Close()
		}
	}
}

// TestDirHandleRecorder: a recording root has no handle of its own, so
// that every read goes through it and is recorded.
func TestDirHandleRecorder(t *testing.T) {
	dir := t.TempDir()
	mkTree(t, dir, map[string]string{"sys/bus/pci/devices/0000:00:01.0/uevent": "PCI_ID=8086:1234\n", "sys/bus/pci/devices/0000:00:01.0/iommu_group": "-> ../../../kernel/iommu_groups/3"})
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRecorder(d)
	h := OpenDirHandle(r.FS(), "sys/bus/pci/devices/0000:00:01.0")
	defer h.Close()
	if _, ok := h.(pathDir); !ok {
		t.Fatalf("recorder's handle is %T, want one that reads through the recorder", h)
	}
	if b, err := h.ReadFile("uevent"); err != nil || string(b) != "PCI_ID=8086:1234\n" {
		t.Fatalf("uevent: %q, %v", b, err)
	}
	if tg, err := h.ReadLink("iommu_group"); err != nil || tg != "../../../kernel/iommu_groups/3" {
		t.Fatalf("iommu_group: %q, %v", tg, err)
	}
	got := map[string]Entry{}
	for _, e := range r.Capture().Entries {
		got[e.Path] = e
	}
	if e := got["sys/bus/pci/devices/0000:00:01.0/uevent"]; !e.Read {
		t.Errorf("uevent not recorded: %+v", got)
	}
	if e := got["sys/bus/pci/devices/0000:00:01.0/iommu_group"]; e.Kind != KindSymlink {
		t.Errorf("iommu_group not recorded: %+v", got)
	}
}

// BenchmarkDirHandle reads a PCI function's files as discovery does,
// through a handle and through whole paths, on a directory root.
func BenchmarkDirHandle(b *testing.B) {
	dir := b.TempDir()
	const n = 64
	files := map[string]string{}
	for i := range n {
		dev := fmt.Sprintf("sys/devices/pci0000:00/0000:00:%02x.0", i)
		files[dev+"/uevent"] = "DRIVER=ice\nPCI_CLASS=20000\nPCI_ID=8086:1889\n"
		files[dev+"/iommu_group"] = fmt.Sprintf("-> ../../../kernel/iommu_groups/%d", i)
		files[fmt.Sprintf("sys/bus/pci/devices/0000:00:%02x.0", i)] = "-> ../../../devices/pci0000:00/" + fmt.Sprintf("0000:00:%02x.0", i)
	}
	mkTree(b, dir, files)
	d, err := OpenDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	fsys := d.FS()
	b.Run("handle", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			h := OpenDirHandle(fsys, fmt.Sprintf("sys/bus/pci/devices/0000:00:%02x.0", i%n))
			h.ReadFile("uevent")
			h.ReadLink("iommu_group")
			h.ReadFile("sriov_totalvfs")
			h.Close()
		}
	})
	b.Run("paths", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			dir := fmt.Sprintf("sys/bus/pci/devices/0000:00:%02x.0", i%n)
			fsys.ReadFile(dir + "/uevent")
			fsys.ReadLink(dir + "/iommu_group")
			fsys.ReadFile(dir + "/sriov_totalvfs")
		}
	})
}
