package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBuildVerify(t *testing.T) {
	// Any ELF file stands in for the berth binary: the test binary itself.
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out1, out2 := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	var stdout bytes.Buffer
	for _, out := range []string{out1, out2} {
		if err := run([]string{"build", "-binary", bin, "-o", out, "-version", "v9.9.9", "-tag", "example.com/berth-agent:v9.9.9"}, &stdout); err != nil {
			t.Fatal(err)
		}
	}
	i1, err := Verify(out1)
	if err != nil {
		t.Fatal(err)
	}
	i2, err := Verify(out2)
	if err != nil {
		t.Fatal(err)
	}
	if i1.Digest != i2.Digest {
		t.Errorf("two builds of the same binary differ: %s vs %s", i1.Digest, i2.Digest)
	}
	fi, _ := os.Stat(bin)
	if i1.BinarySize != fi.Size() || i1.Version != "v9.9.9" || i1.Platform != "linux/amd64" {
		t.Errorf("Verify = %+v, want size %d, version v9.9.9, linux/amd64", i1, fi.Size())
	}
	stdout.Reset()
	if err := run([]string{"verify", out1}, &stdout); err != nil || !strings.Contains(stdout.String(), "ok") {
		t.Errorf("verify: %v %q", err, stdout.String())
	}
}

func TestBuildRefuses(t *testing.T) {
	dir := t.TempDir()
	notELF := filepath.Join(dir, "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"not ELF", Options{Binary: notELF, Tag: "x/y:z"}, "not an ELF"},
		{"missing binary", Options{Binary: filepath.Join(dir, "nope"), Tag: "x/y:z"}, "reading the binary"},
		{"bad tag", Options{Binary: notELF, Tag: "UPPER/case:!"}, "-tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Created = time.Unix(0, 0)
			if _, _, err := Build(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Build error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := Verify(notELF); err == nil {
		t.Error("Verify accepted a file that is not an image tarball")
	}
}

func TestSourceDateEpoch(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{{"", 0, true}, {"1700000000", 1700000000, true}, {"yesterday", 0, false}} {
		got, err := sourceDateEpoch(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got.Unix() != tt.want) {
			t.Errorf("sourceDateEpoch(%q) = %v, %v", tt.in, got, err)
		}
	}
}
