package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/host/hostfs"
)

// DefaultCache is the root of berth's content-addressed download cache; a
// file with digest D lives at <cache>/sha256/<D>.
const DefaultCache = "/var/cache/berth"

// Store finds the files of components on local disk.
type Store struct {
	// Dirs are searched in order, first for a file named by the digest,
	// then by the install path's base name, then by the component name.
	Dirs []string
	// Cache is the cache root ("" for none); it is searched by digest only,
	// after Dirs.
	Cache string
}

// Find returns the path of a local file whose SHA-256 and size are c's. A
// candidate with the wrong content is an error naming the component, the
// expected and the actual digest: a stale or tampered file must not be
// measured or installed silently.
func (s Store) Find(c Component) (string, error) {
	var cands []string
	for _, d := range s.Dirs {
		cands = append(cands, filepath.Join(d, c.SHA256))
	}
	if s.Cache != "" {
		cands = append(cands, filepath.Join(s.Cache, "sha256", c.SHA256))
	}
	var names []string
	if c.Archive == nil {
		names = append(names, path.Base(c.Path))
	}
	names = append(names, c.Name)
	for _, d := range s.Dirs {
		for _, n := range names {
			cands = append(cands, filepath.Join(d, n))
		}
	}
	seen := map[string]bool{}
	for _, p := range cands {
		if seen[p] {
			continue
		}
		seen[p] = true
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		sum, n, err := hashFile(p)
		if err != nil {
			return "", fmt.Errorf("component %s: %w", c.Name, err)
		}
		if sum != c.SHA256 || n != c.Size {
			return "", fmt.Errorf("component %s: %s has sha256 %s (%d bytes), expected sha256 %s (%d bytes)", c.Name, p, sum, n, c.SHA256, c.Size)
		}
		return p, nil
	}
	where := append([]string{}, s.Dirs...)
	if s.Cache != "" {
		where = append(where, filepath.Join(s.Cache, "sha256"))
	}
	if len(where) == 0 {
		return "", fmt.Errorf("component %s (sha256 %s): no directory to look in: pass --from DIR", c.Name, c.SHA256)
	}
	return "", fmt.Errorf("component %s (sha256 %s) not found as %s in %s: put the file there or pass --from DIR",
		c.Name, c.SHA256, strings.Join(append([]string{"<sha256>"}, names...), ", "), strings.Join(where, ", "))
}

// hashFile hashes the regular file p: a FIFO or device swapped in after
// Find's stat is refused unopened (a regular file's read ends).
func hashFile(p string) (string, int64, error) {
	f, err := hostfs.OpenRegular(p, 0)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("reading %s: %w", p, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
