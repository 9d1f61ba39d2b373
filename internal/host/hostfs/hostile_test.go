package hostfs_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/snapshot"
	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/treetest"
)

// hostileFixture is the host a hostile root is built from.
const hostileFixture = "../../../testdata/hosts/tdx-emr-kubeadm-ready"

func fixedNow() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }

// hostileEnv is what the attacks are built against: the root, a directory
// outside it holding the canary, and the canary's unique content.
type hostileEnv struct {
	root, outside, canary string
}

// up is a chain of ".." long enough to climb from any directory of the
// root to the "/" of the machine the test runs on.
func (e hostileEnv) up() string { return strings.Repeat("../", strings.Count(e.root, "/")+12) }

// outsideAbs is where the canary's directory is, as a path without its
// leading "/" (to append to up()).
func (e hostileEnv) outsideRel() string { return strings.TrimPrefix(e.outside, "/") }

// attack is one hostile change to a copy of the fixture, and what berth
// must make of it on each root kind ("dir", "live", "snapshot").
type attack struct {
	name  string
	build func(t testing.TB, e hostileEnv)
	// field and (part of) the reason it must be unknown with, per root
	// kind; a kind not listed uses the entry "" (all kinds).
	field string
	want  map[string]string
	// check asserts facts beyond the unknown reason.
	check func(t testing.TB, kind string, f *facts.Facts)
	// writer is what the writable root (hostfs.Writable) must make of
	// each path the attack plants: the path Resolve gives (the write
	// lands there, inside the root), or "refuse" (TestHostileWritable).
	writer map[string]string
}

var attacks = []attack{
	{
		name: "absolute symlink out (to the canary)",
		build: func(t testing.TB, e hostileEnv) {
			link(t, e, "sys/class/dmi/id/sys_vendor", filepath.Join(e.outside, "canary"))
		},
		writer: map[string]string{"sys/class/dmi/id/sys_vendor": "refuse"}, // dangling inside the root
		check: func(t testing.TB, kind string, f *facts.Facts) {
			if f.Virt.DMI.SysVendor != "" {
				t.Errorf("sys_vendor = %q, want nothing (the link resolves inside the root, to nothing)", f.Virt.DMI.SysVendor)
			}
		},
	},
	{
		name: "absolute symlink out (/etc/shadow)",
		build: func(t testing.TB, e hostileEnv) {
			link(t, e, "sys/class/dmi/id/product_name", "/etc/shadow")
		},
		writer: map[string]string{"sys/class/dmi/id/product_name": "refuse"},
		check: func(t testing.TB, kind string, f *facts.Facts) {
			if f.Virt.DMI.ProductName != "" {
				t.Errorf("product_name = %q, want nothing (the root has no etc/shadow)", f.Virt.DMI.ProductName)
			}
		},
	},
	{
		name: "relative ../../.. chain out",
		build: func(t testing.TB, e hostileEnv) {
			link(t, e, "sys/class/dmi/id/board_vendor", e.up()+e.outsideRel()+"/canary")
		},
		writer: map[string]string{"sys/class/dmi/id/board_vendor": "refuse"},
		check: func(t testing.TB, kind string, f *facts.Facts) {
			if f.Virt.DMI.BoardVendor != "" {
				t.Errorf("board_vendor = %q, want nothing (.. stops at the root)", f.Virt.DMI.BoardVendor)
			}
		},
	},
	{
		name: "directory linked out through a .. chain (features.d)",
		build: func(t testing.TB, e hostileEnv) {
			write(t, filepath.Join(e.outside, "features.d/leak"), "canary.example.com/leak="+e.canary+"\n")
			link(t, e, "etc/berth/features.d", e.up()+e.outsideRel()+"/features.d")
		},
		writer: map[string]string{"etc/berth/features.d/leak": "refuse", "etc/berth/features.d/new": "refuse"},
		check: func(t testing.TB, kind string, f *facts.Facts) {
			if len(f.Plugins.Features) != 0 {
				t.Errorf("features loaded from outside the root: %v", f.Plugins.Features)
			}
		},
	},
	{
		name: "absolute symlink that must resolve inside (etc/os-release -> /usr/lib/os-release)",
		build: func(t testing.TB, e hostileEnv) {
			p := filepath.Join(e.root, "etc/os-release")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(e.root, "usr/lib/os-release"), string(b))
			os.Remove(p)
			link(t, e, "etc/os-release", "/usr/lib/os-release")
		},
		writer: map[string]string{"etc/os-release": "usr/lib/os-release"},
		check: func(t testing.TB, kind string, f *facts.Facts) {
			if f.OS.ID != "ubuntu" || f.OS.VersionID != "24.04" || f.OS.PrettyName != "Ubuntu 24.04.3 LTS" {
				t.Errorf("OS = %+v, want the root's Ubuntu 24.04 (not the machine running the test)", f.OS)
			}
		},
	},
	{
		name: "FIFO where a file is expected",
		build: func(t testing.TB, e hostileEnv) {
			p := filepath.Join(e.root, "proc/cmdline")
			os.Remove(p)
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		writer: map[string]string{"proc/cmdline": "proc/cmdline"},
		field:  "kernel.cmdline",
		want:   map[string]string{"": "not a regular file (FIFO): proc/cmdline"},
	},
	{
		name: "proc/cpuinfo -> /dev/zero (the root's own, a real character device)",
		build: func(t testing.TB, e hostileEnv) {
			p := filepath.Join(e.root, "proc/cpuinfo")
			os.Remove(p)
			link(t, e, "proc/cpuinfo", "/dev/zero")
			testkit.NeedsRoot(t, "mknod of a character device")
			if err := unix.Mknod(filepath.Join(e.root, "dev/zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
				t.Fatalf("mknod (the tests run as root, as CI does): %v", err)
			}
		},
		writer: map[string]string{"proc/cpuinfo": "dev/zero"},
		field:  "cpu",
		want:   map[string]string{"": "not a regular file (character device): proc/cpuinfo"},
	},
	{
		name: "kernel config -> ../../.. chain to /dev/zero (clamped to the root's)",
		build: func(t testing.TB, e hostileEnv) {
			p := "boot/config-6.8.0-1028-intel"
			os.Remove(filepath.Join(e.root, p))
			link(t, e, p, e.up()+"dev/zero")
		},
		writer: map[string]string{"boot/config-6.8.0-1028-intel": "refuse"},
		field:  "kernel.config",
		want:   map[string]string{"": "not a regular file (character device): boot/config-6.8.0-1028-intel"},
	},
	{
		name: "unix socket where a file is expected",
		build: func(t testing.TB, e hostileEnv) {
			p := filepath.Join(e.root, "etc/containerd/config.toml")
			os.Remove(p)
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			l.SetUnlinkOnClose(false)
			l.Close()
		},
		writer: map[string]string{"etc/containerd/config.toml": "etc/containerd/config.toml"},
		field:  "runtimes.containerd.configError",
		want:   map[string]string{"": "not a regular file (socket): etc/containerd/config.toml"},
	},
	{
		name: "loop of symlinks",
		build: func(t testing.TB, e hostileEnv) {
			os.Remove(filepath.Join(e.root, "proc/modules"))
			link(t, e, "proc/modules", "modules.loop")
			link(t, e, "proc/modules.loop", "/proc/modules")
		},
		writer: map[string]string{"proc/modules": "refuse"},
		field:  "kernel.modules",
		want:   map[string]string{"": "unreadable: proc/modules: open proc/modules: too many levels of symbolic links"},
	},
	{
		name: "unreadable: a directory where a file is expected",
		build: func(t testing.TB, e hostileEnv) {
			p := filepath.Join(e.root, "proc/meminfo")
			os.Remove(p)
			write(t, filepath.Join(p, "x"), "x")
		},
		writer: map[string]string{"proc/meminfo": "proc/meminfo"},
		field:  "memory",
		want:   map[string]string{"": "unreadable: proc/meminfo: read proc/meminfo: is a directory"},
	},
	{
		name: "1 GB sparse files (the boot logs), and a FIFO as dev/kmsg",
		build: func(t testing.TB, e hostileEnv) {
			for _, p := range []string{"dmesg", "var/log/kern.log"} {
				p = filepath.Join(e.root, p)
				os.Remove(p)
				write(t, p, "")
				if err := os.Truncate(p, 1<<30); err != nil {
					t.Fatal(err)
				}
			}
			if err := unix.Mkfifo(filepath.Join(e.root, "dev/kmsg"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		writer: map[string]string{"dmesg": "dmesg", "var/log/kern.log": "var/log/kern.log", "dev/kmsg": "dev/kmsg"},
		field:  "kernel.bootLog",
		want: map[string]string{
			"dir":      "larger than 16777216 bytes: dmesg",
			"live":     "larger than 16777216 bytes: var/log/kern.log",
			"snapshot": "truncated in snapshot: var/log/kern.log (0 of 1073741824 bytes kept)",
		},
		check: func(t testing.TB, kind string, f *facts.Facts) {
			r, _ := f.UnknownReason("kernel.bootLog")
			if kind == "live" && !strings.Contains(r, "unreadable: dev/kmsg: open dev/kmsg: not a character device: FIFO") {
				t.Errorf("live kernel.bootLog: %q, want the FIFO dev/kmsg refused", r)
			}
		},
	},
	{
		// PCI discovery reads a device's files through a handle of its
		// directory: the directory is resolved inside the root like any
		// path, so the entry leads to nothing.
		name: "PCI device entry linked out through a .. chain (to a directory with a uevent)",
		build: func(t testing.TB, e hostileEnv) {
			for f, v := range map[string]string{
				"uevent": "DRIVER=" + e.canary + "\nPCI_CLASS=30000\nPCI_ID=DEAD:BEEF\n",
				"vendor": "0xdead\n", "device": "0xbeef\n", "class": "0x030000\n",
			} {
				write(t, filepath.Join(e.outside, "pcidev", f), v)
			}
			p := "sys/bus/pci/devices/0000:b1:00.0"
			if err := os.RemoveAll(filepath.Join(e.root, p)); err != nil {
				t.Fatal(err)
			}
			link(t, e, p, e.up()+e.outsideRel()+"/pcidev")
		},
		writer: map[string]string{"sys/bus/pci/devices/0000:b1:00.0/uevent": "refuse"},
		field:  "pci[0000:b1:00.0]",
		want:   map[string]string{"": "missing: sys/bus/pci/devices/0000:b1:00.0/vendor"},
		check: func(t testing.TB, kind string, f *facts.Facts) {
			for _, d := range f.PCI {
				if d.Address == "0000:b1:00.0" || d.Vendor == "dead" {
					t.Errorf("PCI device read from outside the root: %+v", d)
				}
			}
		},
	},
	{
		// Opened for reading, the FIFO would block discovery for good.
		name: "FIFO as a PCI device's uevent (its vendor, device and class files answer)",
		build: func(t testing.TB, e hostileEnv) {
			p := filepath.Join(e.root, "sys/bus/pci/devices/0000:31:00.0/uevent")
			os.Remove(p)
			if err := unix.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		writer: map[string]string{"sys/bus/pci/devices/0000:31:00.0/uevent": "sys/bus/pci/devices/0000:31:00.0/uevent"},
		check: func(t testing.TB, kind string, f *facts.Facts) {
			if r, ok := f.UnknownReason("pci[0000:31:00.0]"); ok {
				t.Errorf("pci[0000:31:00.0] unknown: %s", r)
			}
			for _, d := range f.PCI {
				if d.Address == "0000:31:00.0" {
					if d.Vendor != "8086" || d.Device != "159b" || d.Class != "020000" || d.Driver != "ice" {
						t.Errorf("0000:31:00.0 = %+v, want the Intel E810 of its vendor, device and class files", d)
					}
					return
				}
			}
			t.Errorf("0000:31:00.0 not listed: %+v", f.PCI)
		},
	},
}

func link(t testing.TB, e hostileEnv, name, target string) {
	t.Helper()
	p := filepath.Join(e.root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(p)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// buildHostile makes the hostile root: a copy of the fixture with every
// attack applied, and a canary outside it.
func buildHostile(t testing.TB) hostileEnv {
	t.Helper()
	var rnd [16]byte
	rand.Read(rnd[:])
	e := hostileEnv{root: filepath.Join(t.TempDir(), "root"), outside: t.TempDir(), canary: "BERTH-CANARY-" + hex.EncodeToString(rnd[:])}
	treetest.Copy(t, hostileFixture, e.root)
	write(t, filepath.Join(e.outside, "canary"), e.canary+"\n")
	for _, a := range attacks {
		a.build(t, e)
	}
	return e
}

// discoverBounded runs discovery on root and fails the test if it does not
// return within a generous deadline (a hang fails, it does not block CI)
// or allocates more than a bound that the attacks (1 GB files,
// /dev/zero) would blow through.
func discoverBounded(t *testing.T, root hostfs.Root) *facts.Facts {
	t.Helper()
	var f *facts.Facts
	runBounded(t, "discovery of "+root.Path(), func() {
		f = discover.Run(context.Background(), root, discover.Options{Now: fixedNow})
	})
	return f
}

// maxAlloc bounds what one discovery of the hostile root may allocate.
const maxAlloc = 256 << 20

func runBounded(t *testing.T, what string, f func()) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("%s did not return within 3 minutes", what)
	}
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > maxAlloc {
		t.Errorf("%s allocated %d MiB, more than %d MiB", what, alloc>>20, maxAlloc>>20)
	}
}

// TestHostileRoots runs discovery (and berth snapshot, and discovery of
// that snapshot) on a root built from a fixture with every attack of the
// issue, on every root kind and with both resolvers: nothing from outside
// the root appears anywhere, every attack becomes an unknown fact with its
// reason or a fact of the root itself, and everything returns.
func TestHostileRoots(t *testing.T) {
	e := buildHostile(t)
	outsideBefore := listing(t, e.outside)
	kinds := []struct {
		name, kind string
		walk       bool
		open       func(t *testing.T) hostfs.Root
	}{
		{"dir", "dir", false, func(t *testing.T) hostfs.Root { return openDir(t, e.root, false) }},
		{"dir-walk", "dir", true, func(t *testing.T) hostfs.Root { return openDir(t, e.root, true) }},
		{"live", "live", false, func(t *testing.T) hostfs.Root { return newLive(t, e.root, false) }},
		{"live-walk", "live", true, func(t *testing.T) hostfs.Root { return newLive(t, e.root, true) }},
		{"snapshot", "snapshot", false, func(t *testing.T) hostfs.Root { return takeSnapshot(t, e, openDir(t, e.root, false), false) }},
		{"snapshot-walk", "snapshot", true, func(t *testing.T) hostfs.Root { return takeSnapshot(t, e, openDir(t, e.root, true), true) }},
		{"snapshot-of-live", "snapshot", false, func(t *testing.T) hostfs.Root { return takeSnapshot(t, e, newLive(t, e.root, false), false) }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			root := k.open(t)
			if r := hostfs.ResolverOf(root); (k.walk && r != "walk+reresolve") || (!k.walk && hostfs.HaveOpenat2() && r != "openat2") {
				t.Fatalf("root resolves with %q", r)
			}
			f := discoverBounded(t, root)
			noCanary(t, e, "facts", factsJSON(t, f))
			for _, a := range attacks {
				if a.field != "" {
					want, ok := a.want[k.kind]
					if !ok {
						want = a.want[""]
					}
					got, _ := f.UnknownReason(a.field)
					if !strings.Contains(got, want) {
						t.Errorf("%s: %s is unknown with %q, want %q...", a.name, a.field, got, want)
					}
				}
				if a.check != nil {
					a.check(t, k.kind, f)
				}
			}
			if testing.Verbose() {
				for _, m := range f.Unknown {
					t.Logf("unknown %s: %s", m.Field, m.Reason)
				}
			}
		})
	}
	if after := listing(t, e.outside); !slices.Equal(after, outsideBefore) {
		t.Errorf("the directory outside the root changed: %v -> %v", outsideBefore, after)
	}
}

// takeSnapshot runs berth snapshot's code on root, checks the archive
// holds nothing from outside and lists the truncated and special files,
// and opens it as a root.
func takeSnapshot(t *testing.T, e hostileEnv, root hostfs.Root, walk bool) hostfs.Root {
	t.Helper()
	var buf bytes.Buffer
	var f *facts.Facts
	var m *snapshot.Manifest
	runBounded(t, "berth snapshot of "+root.Path(), func() {
		var err error
		f, m, err = snapshot.Take(context.Background(), root, &buf, snapshot.Options{Now: fixedNow, Discover: discover.Options{Now: fixedNow}})
		if err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	noCanary(t, e, "facts of berth snapshot", factsJSON(t, f))
	noCanary(t, e, "snapshot archive", untar(t, buf.Bytes()))
	if !slices.ContainsFunc(m.Truncated, func(x hostfs.TruncatedFile) bool { return x.Path == "var/log/kern.log" || x.Path == "dmesg" }) {
		t.Errorf("the 1 GB file is not listed as truncated: %+v", m.Truncated)
	}
	if !slices.Contains(m.Special, hostfs.SpecialFile{Path: "proc/cmdline", Kind: "FIFO"}) {
		t.Errorf("the FIFO is not listed as special: %+v", m.Special)
	}
	file := filepath.Join(t.TempDir(), "snap.tar.gz")
	if err := os.WriteFile(file, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.OpenWith(file, false, hostfs.Fallbacks{Walk: walk, NoProc: walk})
	t.Cleanup(cleanup)
	if err != nil {
		t.Fatalf("the snapshot of the hostile root does not open: %v", err)
	}
	return snap
}

// untar returns every name, link target and content of a .tar.gz.
func untar(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out bytes.Buffer
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString(h.Name + " -> " + h.Linkname + "\n")
		io.Copy(&out, tr)
	}
}

func noCanary(t *testing.T, e hostileEnv, what string, b []byte) {
	t.Helper()
	if bytes.Contains(b, []byte(e.canary)) {
		t.Errorf("%s holds the canary from outside the root", what)
	}
	if bytes.Contains(b, []byte(e.canary[len("BERTH-CANARY-"):])) {
		t.Errorf("%s holds the canary's random part from outside the root", what)
	}
}

func factsJSON(t *testing.T, f *facts.Facts) []byte {
	t.Helper()
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			fi, _ := d.Info()
			out = append(out, p+" "+fi.Mode().String())
		}
		return nil
	})
	return out
}

// openDir opens dir as a directory root, with the walk and re-resolve
// fallbacks when walk is set.
func openDir(t *testing.T, dir string, walk bool) hostfs.Root {
	t.Helper()
	r, err := hostfs.OpenDirWith(dir, hostfs.Fallbacks{Walk: walk, NoProc: walk})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newLive opens dir as a live root, with the walk and re-resolve
// fallbacks when walk is set.
func newLive(t *testing.T, dir string, walk bool) hostfs.Root {
	t.Helper()
	r, err := hostfs.NewLiveWith(dir, hostfs.Fallbacks{Walk: walk, NoProc: walk})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// BenchmarkHostileRoot reports what discovery of the hostile root costs
// (B/op is the memory bound the caps give: the 1 GB files and /dev/zero
// are never read).
func BenchmarkHostileRoot(b *testing.B) {
	e := buildHostile(b)
	root, err := hostfs.OpenDir(e.root)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		discover.Run(context.Background(), root, discover.Options{Now: fixedNow})
	}
}
