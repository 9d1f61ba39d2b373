package testhosts

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestNames(t *testing.T) {
	names := Names(t)
	if !slices.IsSorted(names) {
		t.Errorf("names not sorted: %v", names)
	}
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join("..", "..", "..", "testdata", "hosts", n)); err != nil || !fi.IsDir() {
			t.Errorf("%s is not a fixture directory: %v", n, err)
		}
	}
	if !slices.Contains(names, "snp-genoa-k3s-ready") {
		t.Errorf("names %v lack snp-genoa-k3s-ready", names)
	}
	if _, err := os.Stat(filepath.Join("..", "..", "..", "testdata", "hosts", "README.md")); err == nil && slices.Contains(names, "README.md") {
		t.Error("a file is listed as a fixture host")
	}
}
