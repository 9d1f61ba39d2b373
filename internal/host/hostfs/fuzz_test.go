package hostfs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the fuzz seed corpus of FuzzExtractSnapshot from the code")

// FuzzExtractSnapshot feeds arbitrary bytes to the snapshot reader, which
// unpacks an archive carried in from another machine: whatever the bytes,
// it must return an error or a tree in which nothing leaves the root,
// write nothing outside the directory it was given, and the unpacked root
// must serve no byte from outside. The seeds (testdata/fuzz/
// FuzzExtractSnapshot) are written by TestFuzzSeeds from fuzzSeeds.
func FuzzExtractSnapshot(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		file := filepath.Join(base, "s.tar.gz")
		outside := filepath.Join(base, "outside")
		dest := filepath.Join(base, "root")
		canary := "canary-outside-the-snapshot-" + strconv.Itoa(len(data))
		for _, d := range []string{outside, dest} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(outside, "canary"), []byte(canary), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		err := ExtractSnapshot(file, dest, SnapshotLimits{MaxBytes: 1 << 20, MaxEntries: 2000})
		if err != nil && !errors.Is(err, ErrBadSnapshot) && !strings.Contains(err.Error(), "opening snapshot") {
			t.Fatalf("error without context: %v", err)
		}
		// Nothing was written beside the root or into the canary's
		// directory, accepted or not.
		names := func(d string) []string {
			ents, err := os.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range ents {
				out = append(out, e.Name())
			}
			return out
		}
		if got := names(base); !slices.Equal(got, []string{"outside", "root", "s.tar.gz"}) {
			t.Fatalf("extraction wrote beside its root: %v", got)
		}
		if got := names(outside); !slices.Equal(got, []string{"canary"}) {
			t.Fatalf("extraction wrote outside its root: %v", got)
		}
		if err != nil {
			return
		}
		// Every link of the tree stays inside lexically; nothing special.
		filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(dest, p)
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					t.Fatal(err)
				}
				if filepath.IsAbs(target) {
					t.Errorf("%s -> %s: absolute link left in the tree", rel, target)
				} else if _, err := inRootTarget(filepath.ToSlash(rel), target); err != nil {
					t.Errorf("%s -> %s: %v", rel, target, err)
				}
			case !d.IsDir() && !d.Type().IsRegular():
				t.Errorf("%s: special file %v in the tree", rel, d.Type())
			}
			return nil
		})
		// Served as a root, nothing reads from outside.
		c, err := newConfinedFS(dest, confineOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		d, err := openDirFS(file, c)
		if err != nil {
			return
		}
		fs.WalkDir(d.FS(), ".", func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if b, err := d.FS().ReadFile(p); err == nil && bytes.Contains(b, []byte(canary)) {
				t.Fatalf("%s read the canary outside the root", p)
			}
			return nil
		})
	})
}

// fuzzSeeds are the seed archives: one valid snapshot with every kind of
// entry berth writes, and one per refusal.
func fuzzSeeds() map[string][]byte {
	index := `{"schemaVersion":1,"truncated":[{"path":"usr/share/misc/pci.ids","kept":4,"size":9}],"special":[{"path":"dev/kvm","kind":"character device"}]}`
	recorded := `{"schemaVersion":1,"commands":[{"argv":["/usr/bin/qemu-system-x86_64","--version"],"stdout":"QEMU emulator version 9.2.0\n","exitCode":0}],"probes":{"kvm":{"opened":true,"apiVersion":12}}}`
	seeds := map[string][]tarEntry{
		"valid-snapshot": {
			{name: "etc/", typ: tar.TypeDir},
			{name: "usr/lib/os-release", typ: tar.TypeReg, data: "ID=ubuntu\nVERSION_ID=\"24.04\"\n"},
			{name: "etc/os-release", typ: tar.TypeSymlink, target: "/usr/lib/os-release"},
			{name: "sys/class/net/eth0", typ: tar.TypeSymlink, target: "../../devices/pci0000:00/net/eth0"},
			{name: "sys/devices/pci0000:00/net/eth0/address", typ: tar.TypeReg, data: "52:54:00:12:34:56\n"},
			{name: "usr/share/misc/pci.ids", typ: tar.TypeReg, data: "1af4"},
			{name: "dev/kvm", typ: tar.TypeReg},
			{name: "etc/hostname", typ: tar.TypeLink, target: "usr/lib/os-release"},
			{name: ".berth/", typ: tar.TypeDir},
			{name: RecordedFile, typ: tar.TypeReg, data: recorded},
			{name: SnapshotIndex, typ: tar.TypeReg, data: index},
		},
		"valid-write-through-link": {
			{name: "etc/", typ: tar.TypeDir},
			{name: "l", typ: tar.TypeSymlink, target: "/etc"},
			{name: "l/passwd", typ: tar.TypeReg, data: "root:x:0:0::/root:/bin/sh\n"},
		},
		"refuse-symlink-escape":              {{name: "a/l", typ: tar.TypeSymlink, target: "../../etc"}},
		"refuse-absolute-symlink-dotdot":     {{name: "l", typ: tar.TypeSymlink, target: "/x/../../etc"}},
		"refuse-hardlink-escape":             {{name: "h", typ: tar.TypeLink, target: "../etc/passwd"}},
		"refuse-dotdot-name":                 {{name: "a/../../x", typ: tar.TypeReg, data: "x"}},
		"refuse-absolute-name":               {{name: "/etc/passwd", typ: tar.TypeReg, data: "x"}},
		"refuse-device":                      {{name: "dev/zero", typ: tar.TypeChar}},
		"refuse-fifo":                        {{name: "proc/cpuinfo", typ: tar.TypeFifo}},
		"refuse-write-through-dangling-link": {{name: "l", typ: tar.TypeSymlink, target: "/etc"}, {name: "l/passwd", typ: tar.TypeReg, data: "x"}},
		"refuse-dotdot-through-link":         {{name: "d", typ: tar.TypeSymlink, target: "."}, {name: "d/../../x", typ: tar.TypeReg, data: "x"}},
		"refuse-oversize":                    {{name: "big", typ: tar.TypeReg, data: "x", size: 2 << 20}},
	}
	out := map[string][]byte{}
	for name, entries := range seeds {
		out[name] = tarGz(entries)
	}
	valid := out["valid-snapshot"]
	out["refuse-truncated-gzip"] = valid[:len(valid)/2]
	out["refuse-not-gzip"] = []byte("hello, not a snapshot\n")
	out["refuse-empty"] = tarGz(nil)
	return out
}

// tarGz writes entries as a gzip-compressed tar; an entry's size may claim
// more than its data.
func tarGz(entries []tarEntry) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		size := int64(len(e.data))
		if e.size != 0 {
			size = e.size
		}
		if e.typ != tar.TypeReg {
			size = 0
		}
		tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.target, Size: size, Mode: 0o644})
		tw.Write([]byte(e.data))
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// TestFuzzSeeds keeps the committed seed corpora meaningful: every seed
// fuzzSeeds and resolverSeeds make is committed (go test -update rewrites
// them), and each snapshot seed is accepted or refused as its name says.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzExtractSnapshot")
	seeds := fuzzSeeds()
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range seeds {
			if err := os.WriteFile(filepath.Join(dir, name), fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	rdir := filepath.Join("testdata", "fuzz", "FuzzResolvers")
	for i, s := range resolverSeeds {
		want := fmt.Appendf(nil, "go test fuzz v1\nstring(%q)\nstring(%q)\nstring(%q)\nstring(%q)\n", s[0], s[1], s[2], s[3])
		p := filepath.Join(rdir, fmt.Sprintf("seed-%d", i))
		if *update {
			if err := os.MkdirAll(rdir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("FuzzResolvers seed %s differs from resolverSeeds (go test ./internal/host/hostfs -run TestFuzzSeeds -update): %v", p, err)
		}
	}
	for name := range seeds {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("seed %s not committed (go test ./internal/host/hostfs -run TestFuzzSeeds -update): %v", name, err)
		}
		lit, ok := strings.CutPrefix(string(raw), "go test fuzz v1\n[]byte(")
		lit, ok2 := strings.CutSuffix(lit, ")\n")
		data, err := strconv.Unquote(lit)
		if !ok || !ok2 || err != nil {
			t.Fatalf("seed %s: not in Go's corpus format: %v", name, err)
		}
		file := filepath.Join(t.TempDir(), "s.tar.gz")
		os.WriteFile(file, []byte(data), 0o644)
		err = ExtractSnapshot(file, t.TempDir(), SnapshotLimits{MaxBytes: 1 << 20, MaxEntries: 2000})
		if strings.HasPrefix(name, "valid-") != (err == nil) {
			t.Errorf("seed %s: ExtractSnapshot = %v", name, err)
		}
		if err != nil && !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("seed %s: %v, want ErrBadSnapshot", name, err)
		}
	}
	// The valid seed reads as a snapshot: the link is served inside,
	// the index marks apply.
	file := filepath.Join(t.TempDir(), "s.tar.gz")
	os.WriteFile(file, seeds["valid-snapshot"], 0o644)
	root, cleanup, err := Open(file, false)
	defer cleanup()
	if err != nil {
		t.Fatal(err)
	}
	if b, err := root.FS().ReadFile("etc/os-release"); err != nil || !strings.Contains(string(b), "ubuntu") {
		t.Errorf("etc/os-release: %q %v", b, err)
	}
	if _, err := root.FS().ReadFile("usr/share/misc/pci.ids"); !errors.Is(err, ErrTruncated) {
		t.Errorf("pci.ids: %v, want ErrTruncated", err)
	}
	if _, err := root.FS().ReadFile("dev/kvm"); !errors.Is(err, ErrNotRegular) {
		t.Errorf("dev/kvm: %v, want ErrNotRegular", err)
	}
}

// FuzzResolvers compares the userspace resolver with openat2
// (RESOLVE_IN_ROOT) on a small tree whose three links have fuzzed
// targets: every operation must give the same file or the same error, and
// neither may reach the directory beside the root.
func FuzzResolvers(f *testing.F) {
	f.Fuzz(func(t *testing.T, t1, t2, t3, p string) {
		if !haveOpenat2() {
			t.Fatal("this kernel has no openat2 to compare the userspace resolver with")
		}
		root, _, ok := fuzzTree(t, t1, t2, t3)
		if !ok {
			return
		}
		paths := []string{"l1", "a/l2", "a/b/l3", "l1/f", "a/l2/c/f", "a/b/l3/f", "l1/b/c/f", "a/b/l3/../c/f"}
		if fs.ValidPath(p) && len(p) < 256 {
			paths = append(paths, p)
		}
		var got [2][]string
		for i, opt := range []confineOptions{{}, {walk: true, noProc: true}} {
			c, err := newConfinedFS(root, opt)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range paths {
				d := describe(c, q)
				if strings.Contains(d, "read=outside") {
					t.Fatalf("%s read outside the root (targets %q %q %q)", q, t1, t2, t3)
				}
				got[i] = append(got[i], d)
				// A handle of q's directory reads q as the general way
				// does (and so never outside either).
				if hd := handleDiff(c, q); hd != "" {
					t.Errorf("%s (targets %q %q %q, %s): %s", q, t1, t2, t3, c.resolver(), hd)
				}
			}
			c.close()
		}
		for i, q := range paths {
			if got[0][i] != got[1][i] {
				t.Errorf("%s (targets %q %q %q): openat2 %s, walk %s", q, t1, t2, t3, got[0][i], got[1][i])
			}
		}
	})
}

// fuzzTree makes the tree the resolver fuzz targets work on: a root with
// a file, a directory and links l1, a/l2 and a/b/l3 to targets t1, t2 and
// t3, and beside it a directory outside with files of the same names. ok
// is false for targets no file system takes.
func fuzzTree(t *testing.T, t1, t2, t3 string) (root, outside string, ok bool) {
	for _, s := range []string{t1, t2, t3} {
		if s == "" || len(s) > 512 || strings.ContainsRune(s, 0) {
			return "", "", false
		}
	}
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	mkTree(t, root, map[string]string{"a/b/c/f": "inside", "a/d/": "", "l1": "-> " + t1, "a/l2": "-> " + t2, "a/b/l3": "-> " + t3})
	mkTree(t, outside, map[string]string{"f": "outside", "a/b/c/f": "outside"})
	return root, outside, true
}

// resolverSeeds are the seeds of FuzzResolvers (written to its corpus
// by TestFuzzSeeds -update): targets of l1, a/l2, a/b/l3, and a path.
var resolverSeeds = [][4]string{
	{"a", "b", "c", "l1/b/l3/f"},
	{"/a", "/a/b", "../../../../outside/f", "a/b/l3"},
	{"../../../..", "../../..", "/..", "l1/outside/f"},
	{"l1", "../l1", "l3", "a/b/l3/x"},
	{"a/b/c/", "b/c/f/", "./c/./f", "l1/f"},
	{"/proc/self/root", "..", "../d/../b", "a/l2/c/f"},
	{"0", "0", "0", "0/\x00"}, // found by the fuzzer: NUL in a name
}
