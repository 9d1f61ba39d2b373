package hostfs

import (
	"os"
	"path/filepath"
	"testing"
)

// TestKeepFileHidden: fixture trees keep empty directories in git with a
// .keep file, which a directory root never lists.
func TestKeepFileHidden(t *testing.T) {
	dir := t.TempDir()
	groups := filepath.Join(dir, "sys/kernel/iommu_groups")
	if err := os.MkdirAll(groups, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(groups, KeepFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sys/kernel/other"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := d.FS().ReadDir("sys/kernel/iommu_groups")
	if err != nil || len(ents) != 0 {
		t.Errorf("ReadDir(iommu_groups) = %v, %v; want an empty listing", ents, err)
	}
	ents, err = d.FS().ReadDir("sys/kernel")
	if err != nil || len(ents) != 2 {
		t.Errorf("ReadDir(sys/kernel) = %v, %v; want iommu_groups and other", ents, err)
	}
}
