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
