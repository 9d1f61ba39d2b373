package upstreamtest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestModulePath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"module berth.dev/berth\n\ngo 1.26\n", "berth.dev/berth"},
		{"// comment\nmodule \"berth.dev/berth\"\n", "berth.dev/berth"},
		{"module berth.dev/berth/tools/k8s\n", "berth.dev/berth/tools/k8s"},
		{"go 1.26\n", ""},
	}
	for _, tt := range tests {
		if got := modulePath([]byte(tt.in)); got != tt.want {
			t.Errorf("modulePath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRepoRoot: a nested module's go.mod (tools/k8s) is walked past.
func TestRepoRoot(t *testing.T) {
	top := t.TempDir()
	repo := filepath.Join(top, "main")
	nested := filepath.Join(repo, "tools", "k8s", "sub")
	for p, data := range map[string]string{
		filepath.Join(repo, "go.mod"):                 "module berth.dev/berth\n",
		filepath.Join(repo, "tools", "k8s", "go.mod"): "module berth.dev/berth/tools/k8s\n",
		filepath.Join(nested, "x.go"):                 "package sub\n",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		from    string
		want    string
		wantErr bool
	}{
		{repo, repo, false},
		{nested, repo, false},
		{top, "", true},
	}
	for _, tt := range tests {
		got, err := repoRoot(tt.from)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("repoRoot(%s) = %q, %v; want %q (error %v)", tt.from, got, err, tt.want, tt.wantErr)
		}
	}
}
