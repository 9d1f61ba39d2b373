package treetest

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestListingSeesEveryChange(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := Listing(t, dir)
	for name, change := range map[string]func() error{
		"touched":  func() error { return os.Chtimes(filepath.Join(dir, "f"), time.Now(), time.Unix(1, 0)) },
		"chmod":    func() error { return os.Chmod(filepath.Join(dir, "f"), 0o600) },
		"new link": func() error { return os.Symlink("f", filepath.Join(dir, "l")) },
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
		now := Listing(t, dir)
		if now == base {
			t.Errorf("%s: listing unchanged", name)
		}
		base = now
	}
}
