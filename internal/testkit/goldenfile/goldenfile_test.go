package goldenfile

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing, so
// that the failure messages themselves can be asserted.
type recorder struct {
	testing.TB
	errors, fatals []string
}

func (r *recorder) Helper() {}

func (r *recorder) Failed() bool { return len(r.errors)+len(r.fatals) > 0 }

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// run calls f with a recorder on its own goroutine, as Fatalf ends it.
func run(t *testing.T, f func(tb testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestAssert(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "out.txt")
	tests := []struct {
		name         string
		golden       string // written first, unless empty
		got          string
		update       bool
		wantErrors   []string // substrings of the one Errorf, in order
		wantFatal    string
		wantContents string
	}{
		{name: "update creates", got: "a\nb\n", update: true, wantContents: "a\nb\n"},
		{name: "equal", golden: "a\nb\n", got: "a\nb\n", wantContents: "a\nb\n"},
		{name: "differs", golden: "a\nb\nc\n", got: "a\nB\nc\n", wantContents: "a\nb\nc\n",
			wantErrors: []string{path + " differs", "line 2:", `want: "b"`, `got:  "B"`, "go test ./internal/testkit/goldenfile -update"}},
		{name: "got longer", golden: "a\n", got: "a\nb\n", wantContents: "a\n",
			wantErrors: []string{"line 2:", `want: ""`, `got:  "b"`}},
		{name: "got shorter", golden: "a\nb", got: "a", wantContents: "a\nb",
			wantErrors: []string{"line 2:", `want: "b"`, "got:  (none)"}},
		{name: "update overwrites", golden: "old\n", got: "new\n", update: true, wantContents: "new\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.RemoveAll(filepath.Dir(path))
			if tt.golden != "" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(tt.golden), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := run(t, func(tb testing.TB) { assert(tb, path, []byte(tt.got), tt.update) })
			if len(r.fatals) > 0 {
				t.Fatalf("unexpected fatal: %v", r.fatals)
			}
			if len(tt.wantErrors) == 0 && len(r.errors) > 0 {
				t.Errorf("unexpected errors: %v", r.errors)
			}
			if len(tt.wantErrors) > 0 {
				if len(r.errors) != 1 {
					t.Fatalf("errors = %q, want one", r.errors)
				}
				rest := r.errors[0]
				for _, w := range tt.wantErrors {
					i := strings.Index(rest, w)
					if i < 0 {
						t.Fatalf("error %q lacks %q (in order)", r.errors[0], w)
					}
					rest = rest[i+len(w):]
				}
			}
			b, err := os.ReadFile(path)
			if err != nil || string(b) != tt.wantContents {
				t.Errorf("golden file = %q, %v; want %q", b, err, tt.wantContents)
			}
		})
	}
}

func TestAssertMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.json")
	r := run(t, func(tb testing.TB) { assert(tb, path, []byte("x"), false) })
	if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], "missing.json") ||
		!strings.Contains(r.fatals[0], "go test ./internal/testkit/goldenfile -update") {
		t.Errorf("fatals = %q, want one naming the file and the -update hint", r.fatals)
	}
}

func TestAssertJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.json")
	if err := os.WriteFile(path, []byte("{\n  \"a\": [\n    1\n  ]\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, func(tb testing.TB) { AssertJSON(tb, path, map[string][]int{"a": {1}}) })
	if len(r.errors)+len(r.fatals) > 0 {
		t.Errorf("AssertJSON of an equal value failed: %v %v", r.errors, r.fatals)
	}
	r = run(t, func(tb testing.TB) { AssertJSON(tb, path, func() {}) })
	if len(r.fatals) != 1 || !strings.Contains(r.fatals[0], "func()") {
		t.Errorf("AssertJSON of an unencodable value: fatals = %q", r.fatals)
	}
}

func TestAssertEmbedded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(path, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, got, embedded string
		update              bool
		wantErr             string // substring of the one error, or none
	}{
		{"all equal", "{}\n", "{}\n", false, ""},
		{"embedded stale", "{}\n", "{\"old\":1}\n", false, "embedded copy of " + path + " differs from the file: rebuild"},
		{"file stale", "{\"new\":1}\n", "{}\n", false, path + " differs from the output"},
		{"update", "{}\n", "stale", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, func(tb testing.TB) { assertEmbedded(tb, path, []byte(tt.got), tt.embedded, tt.update) })
			switch {
			case len(r.fatals) > 0:
				t.Errorf("unexpected fatal: %v", r.fatals)
			case tt.wantErr == "" && len(r.errors) > 0:
				t.Errorf("unexpected errors: %q", r.errors)
			case tt.wantErr != "" && (len(r.errors) != 1 || !strings.Contains(r.errors[0], tt.wantErr)):
				t.Errorf("errors = %q, want one with %q", r.errors, tt.wantErr)
			}
		})
	}
}
