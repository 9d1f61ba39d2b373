package critest_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/upstreamtest"
)

// TestStartOnRoot runs every containerd on node-shaped roots: Debian's
// packaged config as shipped, no config at all, a config that does not
// parse and one without CRI, which must come back as errors carrying
// containerd's log.
func TestStartOnRoot(t *testing.T) {
	ctrs := critest.Containerds(t)
	debian, err := os.ReadFile(upstreamtest.Path(t, "runtime-configs", "containerd-1.6.20-debian12-etc-containerd-config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		config  []byte // nil: no etc/containerd/config.toml
		wantErr string // "" when containerd must come up
		wantLog string // what of containerd's log the error must carry
	}{
		{name: "debian-packaged", config: debian},
		{name: "no-config"},
		{name: "broken", config: []byte("version = 2\n[plugins\n"), wantErr: "exited before answering CRI", wantLog: "config.toml"},
		// containerd runs, but without its CRI plugin (disabled here; on a
		// node, a CRI section the plugin refuses): the error must come at
		// once, not after the 20 s timeout.
		{name: "no-cri", config: []byte("version = 2\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n"), wantErr: "runs without its CRI plugin", wantLog: "successfully booted"},
	}
	// What the default configs make containerd create must stay in its
	// namespace: paths absent from the machine now are absent afterwards.
	var absent []string
	for _, p := range []string{"/etc/cni", "/var/lib/containerd", "/var/lib/nri"} {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			absent = append(absent, p)
		}
	}
	t.Cleanup(func() { // after every subtest
		for _, p := range absent {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s appeared on the machine while containerd ran in its namespace", p)
			}
		}
	})
	for _, c := range ctrs {
		for _, tt := range tests {
			t.Run(tt.name+"/"+c.Version, func(t *testing.T) {
				t.Parallel()
				root := t.TempDir()
				if err := os.MkdirAll(filepath.Join(root, "etc/containerd"), 0o755); err != nil {
					t.Fatal(err)
				}
				if tt.config != nil {
					if err := os.WriteFile(filepath.Join(root, "etc/containerd/config.toml"), tt.config, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				d, err := critest.StartOnRoot(t, c.Bin, root, critest.NewDirs(t))
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.wantLog) {
						t.Fatalf("got %v, want an error with %q and containerd's log (%q)", err, tt.wantErr, tt.wantLog)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := d.Status.Handlers["runc"]; !ok {
					t.Errorf("no runc handler: %v", d.Status.Names())
				}
				d.Stop()
				if _, err := d.Query(); err == nil {
					t.Error("containerd still answers after Stop")
				}
			})
		}
	}
}
