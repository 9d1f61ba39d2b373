package main

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/upstreamtest"
)

// TestGeneratedUpToDate holds internal/node/configure/kata_upstream_gen.go
// equal to what katagen writes from testdata/upstream now.
func TestGeneratedUpToDate(t *testing.T) {
	want, err := Source(upstreamtest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../kata_upstream_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/node/configure/kata_upstream_gen.go is out of date with testdata/upstream or katagen: run go generate ./internal/node/configure")
	}
}

// TestBase: a key is in the base when at least half of the templates give
// it the same value; the order is table by table, first seen first.
func TestBase(t *testing.T) {
	tmpl := func(keys ...key) template { return template{keys: keys} }
	tests := []struct {
		name    string
		ts      []template
		want    []key
		wantErr string
	}{
		{
			name: "majority value wins",
			ts: []template{
				tmpl(key{"hypervisor", "path", "a"}),
				tmpl(key{"hypervisor", "path", "a"}),
				tmpl(key{"hypervisor", "path", "b"}),
			},
			want: []key{{"hypervisor", "path", "a"}},
		},
		{
			name: "half is enough",
			ts: []template{
				tmpl(key{"runtime", "x", 1}),
				tmpl(key{"runtime", "y", true}),
			},
			want: []key{{"runtime", "x", 1}, {"runtime", "y", true}},
		},
		{
			name: "under half is left to the shims",
			ts: []template{
				tmpl(key{"agent", "x", 1}),
				tmpl(key{"agent", "x", 2}),
				tmpl(key{"agent", "x", 3}),
			},
		},
		{
			name: "tables in berth's order, keys first seen first",
			ts: []template{
				tmpl(key{"runtime", "r", 1}, key{"hypervisor", "b", 1}),
				tmpl(key{"hypervisor", "a", 1}, key{"hypervisor", "b", 1}, key{"runtime", "r", 1}),
			},
			want: []key{{"hypervisor", "b", 1}, {"hypervisor", "a", 1}, {"runtime", "r", 1}},
		},
		{
			name: "arrays compare by value",
			ts: []template{
				tmpl(key{"hypervisor", "paths", []any{"a"}}),
				tmpl(key{"hypervisor", "paths", []any{"a"}}),
				tmpl(key{"hypervisor", "paths", []any{"b"}}),
			},
			want: []key{{"hypervisor", "paths", []any{"a"}}},
		},
		{
			name: "a tie is an error",
			ts: []template{
				tmpl(key{"hypervisor", "path", "a"}),
				tmpl(key{"hypervisor", "path", "b"}),
			},
			wantErr: "no base value",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := base(tt.ts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("base = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDiff: a shim sets what differs from the base or is new, in its own
// order, and drops the base keys it does not set, sorted.
func TestDiff(t *testing.T) {
	b := []key{{"hypervisor", "path", "q"}, {"hypervisor", "rootless", false}, {"agent", "debug", false}}
	tests := []struct {
		name     string
		keys     []key
		wantSet  []key
		wantDrop []string
	}{
		{"same as the base", b, nil, nil},
		{
			name:     "changed, new and missing",
			keys:     []key{{"runtime", "new", 1}, {"hypervisor", "path", "c"}, {"hypervisor", "rootless", false}},
			wantSet:  []key{{"runtime", "new", 1}, {"hypervisor", "path", "c"}},
			wantDrop: []string{"agent.debug"},
		},
		{"nothing", nil, nil, []string{"agent.debug", "hypervisor.path", "hypervisor.rootless"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, drop := diff(b, template{keys: tt.keys})
			if !reflect.DeepEqual(set, tt.wantSet) || !reflect.DeepEqual(drop, tt.wantDrop) {
				t.Errorf("diff = %v, %v; want %v, %v", set, drop, tt.wantSet, tt.wantDrop)
			}
		})
	}
}

// TestBerthTable: the platform's hypervisor section and the agent's name
// are dropped from a template's table; a table berth does not write is an
// error.
func TestBerthTable(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{"hypervisor.qemu", "hypervisor", false},
		{"hypervisor.qemu.factory", "hypervisor.factory", false},
		{"agent.kata", "agent", false},
		{"agent.kata.mem_agent", "agent.mem_agent", false},
		{"factory", "factory", false},
		{"runtime", "runtime", false},
		{"hypervisor", "", true},
		{"image", "", true},
	}
	for _, tt := range tests {
		got, err := berthTable(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("berthTable(%q) = %q, %v; want %q (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestLiteral: the Go source of each value type round-trips through the
// types KataConfig's writer takes (int, not int64; floats marked).
func TestLiteral(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{"a\"b", `"a\"b"`},
		{true, "true"},
		{9223372036854775807, "9223372036854775807"},
		{0.2, "float64(0.2)"},
		{1.0, "float64(1)"},
		{[]any{}, "[]any{}"},
		{[]any{"x", 1}, `[]any{"x", 1}`},
		{[]map[string]any{{"path": "p", "name": "n"}}, `[]map[string]any{{"name": "n", "path": "p"}}`},
	}
	for _, tt := range tests {
		if got := literal(tt.in); got != tt.want {
			t.Errorf("literal(%#v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// TestGoValue: decoded TOML becomes the Go types KataConfig writes.
func TestGoValue(t *testing.T) {
	tests := []struct {
		in      any
		want    any
		wantErr bool
	}{
		{int64(3), 3, false},
		{"s", "s", false},
		{[]any{int64(1), "a"}, []any{1, "a"}, false},
		{[]any{map[string]any{"n": int64(1)}}, []map[string]any{{"n": 1}}, false},
		{[]any{map[string]any{}, "x"}, nil, true},
		{map[string]any{}, nil, true},
	}
	for _, tt := range tests {
		got, err := goValue(tt.in)
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("goValue(%#v) = %#v, %v; want %#v (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
