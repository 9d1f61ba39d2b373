package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedUpToDate holds internal/host/facts/json_gen.go equal to what
// jsongen writes for the types as they are now.
func TestGeneratedUpToDate(t *testing.T) {
	want, err := Source()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../json_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/host/facts/json_gen.go is out of date with the types of Facts: run go generate ./internal/host/facts")
	}
}

// TestWriteFile replaces a file whole and leaves nothing beside it.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	name := dir + "/out.go"
	for _, content := range []string{"package a\n", "package b\n"} {
		if err := writeFile(name, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(name)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("directory holds %v (%v), want out.go alone", ents, err)
	}
}
