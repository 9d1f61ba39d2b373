package install

import (
	"os"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/node/fetch"
)

// FuzzOpenBundle feeds arbitrary bytes to the bundle reader, which indexes
// an untrusted tar carried in from outside: it must return an error or a
// bundle whose members read within the file, never panic.
func FuzzOpenBundle(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "b.tar")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := OpenBundle(p)
		if err != nil {
			return
		}
		if _, err := b.Manifest(); err != nil {
			return
		}
		for name := range b.members {
			if len(name) > 7 && name[:7] == "sha256/" {
				for _, c := range b.Lookup(fetch.Item{SHA256: name[7:]}) {
					rc, err := c.Open()
					if err == nil {
						rc.Close()
					}
				}
			}
		}
	})
}
