// Package goldenfile compares test output with golden files under a
// package's testdata/ and rewrites them when the test binary runs with
// -update. It is imported only by tests: importing it registers the
// -update flag, which a production binary must not have.
package goldenfile

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// update is the one -update flag of every test binary that uses golden
// files; registering it here, once, is what lets several test files of a
// package share it without a duplicate-flag panic.
var update = flag.Bool("update", false, "rewrite golden files")

// Update reports whether the test binary runs with -update, for tests that
// write generated files of their own beside the golden ones.
func Update() bool { return *update }

// Assert compares got with the golden file at path. Under -update it
// writes got there instead (creating the directory), so that the diff is
// reviewed in version control rather than in the test output.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	assert(t, path, got, Update())
}

// AssertJSON is Assert of JSON(v).
func AssertJSON(t testing.TB, path string, v any) {
	t.Helper()
	Assert(t, path, JSON(t, v))
}

// JSON is v as JSON indented by two spaces with a trailing newline, the
// form of every JSON golden file and generated schema in the repository.
func JSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("encoding %T as JSON: %v", v, err)
	}
	return append(b, '\n')
}

func assert(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("creating the directory of %s: %v", path, err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("writing golden file: %v", err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file: %v (run %s to create it)", err, hint())
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output at %s (run %s and review the diff)", path, firstDiff(want, got), hint())
	}
}

// firstDiff describes the first line where want and got differ, quoted so
// that white space shows; a line past the end of one side is "(none)".
func firstDiff(want, got []byte) string {
	wl := strings.Split(string(want), "\n")
	gl := strings.Split(string(got), "\n")
	line := func(ls []string, i int) string {
		if i < len(ls) {
			return fmt.Sprintf("%q", ls[i])
		}
		return "(none)"
	}
	for i := 0; i < len(wl) || i < len(gl); i++ {
		if i >= len(wl) || i >= len(gl) || wl[i] != gl[i] {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, line(wl, i), line(gl, i))
		}
	}
	return "no line" // unreachable: Split keeps every byte, so equal lines mean equal bytes
}

// hint is the command that rewrites the golden files of the package under
// test: go test runs a test binary in its package's directory, so that
// directory relative to the module root names the package.
func hint() string {
	pkg := "."
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				if rel, err := filepath.Rel(dir, wd); err == nil && rel != "." {
					pkg = "./" + filepath.ToSlash(rel)
				}
				break
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "go test " + pkg + " -update"
}

// AssertEmbedded is Assert for a generated file that its package also
// embeds (a JSON schema served by the binary): once the file matches, the
// embedded copy must match too, or the binary serves a stale one. Under
// -update the embedded copy is stale until the next build, so it is not
// compared.
func AssertEmbedded(t testing.TB, path string, got []byte, embedded string) {
	t.Helper()
	assertEmbedded(t, path, got, embedded, Update())
}

func assertEmbedded(t testing.TB, path string, got []byte, embedded string, update bool) {
	t.Helper()
	before := t.Failed()
	assert(t, path, got, update)
	if update || t.Failed() != before {
		return
	}
	if embedded != string(got) {
		t.Errorf("the embedded copy of %s differs from the file: rebuild", path)
	}
}
