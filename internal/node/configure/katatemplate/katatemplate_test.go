package katatemplate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/upstreamtest"
)

func TestShellUnquote(t *testing.T) {
	tests := []struct{ in, want string }{
		{`plain`, `plain`},
		{`\"a\"`, `"a"`},
		{`"a" "b"`, `a b`},
		{`a\\b`, `a\b`},
		{`\`, `\`},
	}
	for _, tt := range tests {
		if got := shellUnquote(tt.in); got != tt.want {
			t.Errorf("shellUnquote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestExpand fills @NAME@ from the Makefile's variables, resolving $(...)
// references and the kernel-name make functions, leaves comments out, and
// fails on a name it cannot fill.
func TestExpand(t *testing.T) {
	e := &Expander{vars: map[string]string{
		"PREFIX":     "/opt/berth",
		"BINDIR":     "$(PREFIX)/bin",
		"QEMUPATH":   "$(BINDIR)/qemu",
		"KERNEL":     "$(call MAKE_KERNEL_NAME_NV,compressed)",
		"ARGS":       `[\"-o\", \"x\"]`,
		"UNRESOLVED": "$(NOWHERE)/x",
		"BADCALL":    "$(call MAKE_OTHER,compressed)",
	}}
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{"nested references", `path = "@QEMUPATH@"`, `path = "/opt/berth/bin/qemu"`, ""},
		{"kernel name", `kernel = "@KERNEL@"`, `kernel = "vmlinuz-nvidia-gpu.container"`, ""},
		{"shell quoting", `args = @ARGS@`, `args = ["-o", "x"]`, ""},
		{"comments dropped", "# @MISSING@\na = 1", "a = 1", ""},
		{"missing name", `a = "@MISSING@"`, "", "no value for [MISSING]"},
		{"unresolved variable", `a = "@UNRESOLVED@"`, "", "unresolved make variables [NOWHERE]"},
		{"unknown make function", `a = "@BADCALL@"`, "", "unresolved make variables [MAKE_OTHER]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.Expand([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Expand = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestKeys returns keys in the template's order, with their tables, and
// an array of tables as one key at its first element.
func TestKeys(t *testing.T) {
	text := `
[hypervisor.qemu]
path = "/q"
kernel_params = "a b"
valid = [
  "x",
  "y",
]

[hypervisor.qemu.factory]
enable_template = false

[agent.kata]
dial_timeout = 45

[runtime]
overhead = 0.5

[[hypervisor.qemu.images]]
name = "gpu"

[[hypervisor.qemu.images]]
name = "coco"
`
	got, err := Keys(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []Key{
		{"hypervisor.qemu", "path", "/q"},
		{"hypervisor.qemu", "kernel_params", "a b"},
		{"hypervisor.qemu", "valid", []any{"x", "y"}},
		{"hypervisor.qemu.factory", "enable_template", false},
		{"agent.kata", "dial_timeout", int64(45)},
		{"runtime", "overhead", 0.5},
		{"hypervisor.qemu", "images", []any{map[string]any{"name": "gpu"}, map[string]any{"name": "coco"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Keys =\n%#v\nwant\n%#v", got, want)
	}
	if _, err := Keys("[a\nb = "); err == nil {
		t.Error("Keys of malformed TOML: no error")
	}
}

// TestEveryTemplate expands every template in testdata/upstream: each
// parses, and Keys lists exactly the keys the decoded document has.
func TestEveryTemplate(t *testing.T) {
	dir := upstreamtest.Dir(t)
	ts, err := Templates(dir)
	if err != nil {
		t.Fatal(err)
	}
	runtimes := map[string]int{}
	for _, tm := range ts {
		runtimes[tm.Runtime]++
		t.Run(tm.ID(), func(t *testing.T) {
			e, err := NewExpander(dir, tm.Runtime, "/opt/berth")
			if err != nil {
				t.Fatal(err)
			}
			doc, err := e.ExpandFile(tm.File)
			if err != nil {
				t.Fatal(err)
			}
			in, err := os.ReadFile(tm.File)
			if err != nil {
				t.Fatal(err)
			}
			text, err := e.Expand(in)
			if err != nil {
				t.Fatal(err)
			}
			keys, err := Keys(text)
			if err != nil {
				t.Fatal(err)
			}
			if n := countLeaves(doc); len(keys) != n {
				t.Errorf("Keys lists %d keys, the document has %d (arrays of tables counted once)", len(keys), n)
			}
		})
	}
	for _, rt := range Runtimes() {
		if runtimes[rt] == 0 {
			t.Errorf("no template of %s", rt)
		}
	}
}

// countLeaves counts a decoded document's keys the way Keys lists them.
func countLeaves(m map[string]any) int {
	n := 0
	for _, v := range m {
		switch x := v.(type) {
		case map[string]any:
			n += countLeaves(x)
		default:
			n++
		}
	}
	return n
}

// TestTemplatesNone: an empty upstream folder is an error, not an empty
// list that would make every comparison pass.
func TestTemplatesNone(t *testing.T) {
	if _, err := Templates(t.TempDir()); err == nil {
		t.Error("Templates of an empty folder: no error")
	}
	if _, err := NewExpander(t.TempDir(), GoRuntime, "/p"); err == nil {
		t.Error("NewExpander without makefile-values.tsv: no error")
	}
	if _, err := (&Expander{}).ExpandFile(filepath.Join(t.TempDir(), "none.toml.in")); err == nil {
		t.Error("ExpandFile of a missing file: no error")
	}
}
