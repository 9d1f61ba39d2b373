package gensrc

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFile replaces a file whole and leaves nothing beside it.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "out.go")
	for _, content := range []string{"package a\n", "package b\n"} {
		if err := WriteFile(name, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
		if fi, err := os.Stat(name); err != nil || fi.Mode().Perm() != 0o644 {
			t.Fatalf("mode %v (%v), want 0644", fi.Mode(), err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("directory holds %v (%v), want out.go alone", ents, err)
	}
}

// TestWriteFileFails: a directory that does not exist is an error naming
// it, and nothing is created.
func TestWriteFileFails(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "missing", "out.go")
	if err := Emit(name, []byte("package a\n")); err == nil {
		t.Fatalf("Emit into a missing directory succeeded")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("a failed write left %v", ents)
	}
}
