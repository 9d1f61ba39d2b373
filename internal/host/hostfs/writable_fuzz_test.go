package hostfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FuzzResolve checks the writer's resolver (Resolve) against the kernel's
// chroot semantics (openat2 with RESOLVE_IN_ROOT) on links with arbitrary
// targets: where Resolve accepts a path, the kernel reaches the same file
// (or, for a path Resolve says is missing, nothing), the result is a clean
// path inside the root, and a write there (WriteAtomic through the
// Writable) changes nothing outside. Resolve may refuse what the kernel
// would follow (a target climbing above the root, a dangling link); it may
// never accept something else.
func FuzzResolve(f *testing.F) {
	f.Fuzz(func(t *testing.T, t1, t2, t3, p string) {
		if !haveOpenat2() {
			t.Fatal("this kernel has no openat2 to compare the resolver with")
		}
		root, outside, ok := fuzzTree(t, t1, t2, t3)
		if !ok {
			return
		}
		paths := []string{"l1", "a/l2", "a/b/l3", "l1/f", "a/l2/c/f", "a/b/l3/f", "l1/b/c/f", "l1/new", "a/b/l3/new"}
		if len(p) < 256 && !strings.ContainsRune(p, 0) {
			paths = append(paths, p)
		}
		before := treeListing(t, outside)
		w, err := OpenWritable(root)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(rootFd)
		for _, q := range paths {
			rel, exists, err := w.Resolve(q)
			if err != nil {
				var ue *UnsafePathError
				if !errors.As(err, &ue) {
					t.Fatalf("Resolve(%q) (targets %q %q %q): %v, want an *UnsafePathError", q, t1, t2, t3, err)
				}
				continue
			}
			if rel != path.Clean(rel) || path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("Resolve(%q) (targets %q %q %q) = %q: not a clean path inside the root", q, t1, t2, t3, rel)
			}
			// RESOLVE_IN_ROOT takes an absolute path inside the root.
			kfd, kerr := unix.Openat2(rootFd, q, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
			if kerr == nil {
				defer unix.Close(kfd)
			}
			if !exists {
				if kerr == nil {
					t.Fatalf("Resolve(%q) (targets %q %q %q) = %q, missing; the kernel opens it", q, t1, t2, t3, rel)
				}
				continue
			}
			if kerr != nil {
				t.Fatalf("Resolve(%q) (targets %q %q %q) = %q, exists; the kernel: %v", q, t1, t2, t3, rel, kerr)
			}
			var ks, rs unix.Stat_t
			if err := unix.Fstat(kfd, &ks); err != nil {
				t.Fatal(err)
			}
			if err := unix.Lstat(filepath.Join(root, rel), &rs); err != nil {
				t.Fatalf("Resolve(%q) = %q: %v", q, rel, err)
			}
			if ks.Dev != rs.Dev || ks.Ino != rs.Ino {
				t.Fatalf("Resolve(%q) (targets %q %q %q) = %q, not the file the kernel reaches", q, t1, t2, t3, rel)
			}
		}
		// Write through every accepted path whose directory exists.
		for _, q := range paths {
			rel, _, err := w.Resolve(q)
			if err != nil || rel == "." {
				continue
			}
			if fi, err := w.Lstat(path.Dir(rel)); err != nil || !fi.IsDir() {
				continue
			}
			_ = WriteAtomic(w, rel, []byte("berth"), 0o644)
		}
		if after := treeListing(t, outside); !slices.Equal(before, after) {
			t.Fatalf("writes (targets %q %q %q) changed outside the root:\n%v\nnow\n%v", t1, t2, t3, before, after)
		}
	})
}

// treeListing lists dir's entries with their content, to compare.
func treeListing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		b, _ := os.ReadFile(p)
		out = append(out, p+"="+string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// resolveSeeds are the seeds of FuzzResolve (written to its corpus by
// TestFuzzResolveSeeds -update): targets of l1, a/l2, a/b/l3, and a path.
var resolveSeeds = [][4]string{
	{"a", "b", "c", "l1/b/l3/f"},
	{"/a", "/a/b", "../../../../outside/f", "/a/b/l3"},
	{"../../../..", "../../..", "/..", "l1/outside/f"},
	{"l1", "../l1", "l3", "a/b/l3/x"},
	{"a/b/c/", "b/c/f/", "./c/./f", "l1/f"},
	{"/proc/self/root", "..", "../d/../b", "a/l2/c/f"},
	{"/nowhere", "/a/missing", "missing/..", "/l1/x"},   // dangling, absolute and relative
	{"/a/b/c/f", "d/../b/c/f", "/a/b/c/f/", "a/b/l3/f"}, // links to a file, a file as a directory
	{"l1", "l2", "/a/b/l3", "/"},                        // loops
}

// TestFuzzResolveSeeds: FuzzResolve's committed corpus is resolveSeeds.
func TestFuzzResolveSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzResolve")
	for i, s := range resolveSeeds {
		want := fmt.Appendf(nil, "go test fuzz v1\nstring(%q)\nstring(%q)\nstring(%q)\nstring(%q)\n", s[0], s[1], s[2], s[3])
		p := filepath.Join(dir, fmt.Sprintf("seed-%d", i))
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("FuzzResolve seed %s differs from resolveSeeds (go test ./internal/host/hostfs -run TestFuzzResolveSeeds -update): %v", p, err)
		}
	}
}
