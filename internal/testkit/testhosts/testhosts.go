// Package testhosts lists the fixture host trees under testdata/hosts that
// the tests of every package share. It is imported only by tests.
package testhosts

import (
	"os"
	"path/filepath"
	"testing"
)

// Names lists the fixture hosts, the directories under testdata/hosts at
// the module root, sorted. None is a loud failure: a test over every
// fixture must not pass by testing nothing.
func Names(t testing.TB) []string {
	t.Helper()
	dir := filepath.Join(moduleRoot(t), "testdata", "hosts")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading the fixture hosts: %v", err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("no fixture hosts under %s", dir)
	}
	return names
}

// moduleRoot is the directory of go.mod above the working directory, which
// go test sets to the package under test.
func moduleRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("finding the module root: %v", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatalf("no go.mod above %s", wd)
		}
	}
}
