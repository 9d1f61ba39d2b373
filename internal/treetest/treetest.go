// Package treetest describes directory trees for tests that must prove a
// command changed nothing outside (or inside) a root: a canary directory
// outside a host root, a root a refused command must leave alone.
package treetest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Listing describes everything under dir, one line per entry: relative
// name, mode, size, mtime in nanoseconds and, for a symlink, its target.
// Two listings are equal only if nothing was added, removed, rewritten,
// re-linked or touched.
func Listing(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s: %v", p, err))
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		l := fmt.Sprintf("%s %v %d %d", rel, fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			l += " -> " + target
		}
		lines = append(lines, l)
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
