// Package upstreamtest finds the real upstream files that conformance tests
// compare berth with: configs written by real containerd versions, Kata's
// templates and so on. They live in the repository, in testdata/upstream/
// with their licences and a provenance list, so that a fresh clone passes
// its tests with nothing beside it; tests must find them from wherever
// `go test` runs the package.
package upstreamtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Module is the module path whose go.mod marks the repository root.
const Module = "berth.dev/berth"

// Rel is the folder of the upstream files, relative to the repository
// root: inside the clone, so that the tests need nothing beside it.
const Rel = "testdata/upstream"

// Dir returns the absolute path of the upstream files, <repository
// root>/testdata/upstream. The test fails, never skips, when it is
// missing: a conformance test that silently does not run proves nothing.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := find()
	if err != nil {
		t.Fatalf("upstream reference files: %v", err)
	}
	return dir
}

// Path returns elem joined under Dir, failing the test when it does not
// exist.
func Path(t testing.TB, elem ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{Dir(t)}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("upstream reference file: %v (%s/provenance.tsv lists the files the tests read: restore them with git)", err, Rel)
	}
	return p
}

// Glob returns the matches of pattern under Dir, sorted, failing the test
// when there are none: an empty corpus would pass every check.
func Glob(t testing.TB, pattern string) []string {
	t.Helper()
	dir := Dir(t)
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatalf("upstream reference files: %v", err)
	}
	if len(m) == 0 {
		t.Fatalf("upstream reference files: nothing matches %s in %s", pattern, dir)
	}
	return m
}

// RepoRoot returns the root of the berth repository the test runs in (the
// directory whose go.mod declares Module), failing the test when there is
// none.
func RepoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := repoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

const hint = "the tests read real upstream files from " + Rel + "/ in the repository " +
	"(see its README.md): restore them with git"

func find() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := repoRoot(wd)
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, hint)
	}
	dir := filepath.Join(root, filepath.FromSlash(Rel))
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("no directory %s: %s", dir, hint)
	}
	return dir, nil
}

// repoRoot walks up from dir to the directory whose go.mod declares
// Module. Nested modules (tools/k8s, ...) have go.mod files too, so the
// module line is what identifies the root, not the file.
func repoRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && modulePath(data) == Module {
			return d, nil
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of module %s in %s or above", Module, dir)
		}
	}
}

// modulePath is the path of go.mod's module directive.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}
