package discover

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
)

// TestVersionCacheLive discovers this machine's root twice with one
// cache, as the agent does every interval: the second run answers the
// binaries' static versions from the cache, and they are the versions the
// first run read from the files.
func TestVersionCacheLive(t *testing.T) {
	root, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	c := NewVersionCache()
	ctx := context.Background()
	first := Run(ctx, root, Options{Versions: c})
	static := 0
	for _, b := range first.Binaries {
		if b.VersionFrom != "" && b.VersionFrom != fromRun {
			static++
		}
	}
	if static == 0 {
		t.Fatalf("no binary's version came from a static source on this machine (CI installs containerd): %+v", first.Binaries)
	}
	if c.hits != 0 {
		t.Fatalf("first run: %d cache hits, want 0", c.hits)
	}
	second := Run(ctx, root, Options{Versions: c})
	if c.hits != static {
		t.Errorf("second run: %d cache hits, want one per static version (%d)", c.hits, static)
	}
	if len(second.Binaries) != len(first.Binaries) {
		t.Fatalf("binaries: %d then %d", len(first.Binaries), len(second.Binaries))
	}
	for i, b := range second.Binaries {
		if a := first.Binaries[i]; a.Version != b.Version || a.VersionFrom != b.VersionFrom || a.Vendor != b.Vendor {
			t.Errorf("%s: %s (%s) from the files, %s (%s) from the cache", b.Path, a.Version, a.VersionFrom, b.Version, b.VersionFrom)
		}
	}
}

// TestVersionCacheInvalidation: an entry answers only for the very files
// it was read from; a binary or package database rewritten in place (same
// path, same size) or replaced is read again.
func TestVersionCacheInvalidation(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "containerd")
	id := func() fileID {
		t.Helper()
		fi, err := os.Stat(bin)
		if err != nil {
			t.Fatal(err)
		}
		i, ok := identify(fi)
		if !ok {
			t.Fatal("no file identity on this system")
		}
		return i
	}
	if err := os.WriteFile(bin, []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	v1 := id()
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(bin, []byte("v2"), 0o755); err != nil { // same size, in place
		t.Fatal(err)
	}
	rewritten := id()
	repl := bin + ".new"
	if err := os.WriteFile(repl, []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(repl, bin); err != nil { // as a package manager replaces
		t.Fatal(err)
	}
	replaced := id()
	if v1 == rewritten || rewritten == replaced {
		t.Fatalf("identities do not tell the versions apart: %+v %+v %+v", v1, rewritten, replaced)
	}
	dpkg := fileID{ino: 7, size: 100}
	sv := staticVersion{Version: "2.2.9", From: fromBuildInfo}
	for _, tc := range []struct {
		name      string
		bin, dpkg fileID
		hit       bool
	}{
		{"same files", v1, dpkg, true},
		{"binary rewritten in place", rewritten, dpkg, false},
		{"binary replaced", replaced, dpkg, false},
		{"package database changed", v1, fileID{ino: 7, size: 101}, false},
		{"package database appeared", v1, fileID{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewVersionCache()
			c.put("k", v1, dpkg, sv)
			got, ok := c.get("k", tc.bin, tc.dpkg)
			if ok != tc.hit || (ok && got != sv) {
				t.Errorf("get: %+v %v, want hit %v", got, ok, tc.hit)
			}
		})
	}
}
