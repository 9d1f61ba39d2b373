package nodeinstall

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContainerdDropInOption: --containerd-drop-in is read and checked
// before anything is opened; a missing file, one that is not TOML or an
// empty one is a usage error naming the flag (and the line).
func TestContainerdDropInOption(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, file, want string
	}{
		{"valid", write("ok.toml", "[plugins.'io.containerd.cri.v1.images']\n  max_concurrent_downloads = 7\n"), ""},
		{"missing", filepath.Join(dir, "nope.toml"), "--containerd-drop-in"},
		{"not TOML", write("bad.toml", "a = 1\n[plugins\n"), "line 2: not TOML"},
		{"empty", write("empty.toml", "\n"), "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{NodeName: "n", Platforms: mustPlatforms(t, "kubeadm-qemu-none"), Manifest: "m.yaml" + pin, Prefix: "/opt/berth", ContainerdDropIn: tc.file}
			s, err := o.Check()
			if tc.want == "" {
				if err != nil || len(s.ContainerdDropIn) == 0 {
					t.Fatalf("Check() = %v, drop-in %q", err, s.ContainerdDropIn)
				}
				return
			}
			if err == nil || !IsUsage(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check() = %v; want a usage error containing %q", err, tc.want)
			}
		})
	}
}
