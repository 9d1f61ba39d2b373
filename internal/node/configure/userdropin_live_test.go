//go:build linux

package configure_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/platform"
)

// TestUserDropInLive: the operator's containerd drop-in (kata-deploy's
// containerd.userDropIn, the chart's nodeInstaller.containerdUserDropIn)
// goes beside berth's handler drop-in through the same apply, and the
// real containerd 2.4 (its restart and CRI check, as the node-installer's)
// loads it: `containerd config dump` shows its setting. Taken away, it is
// removed and the handler stays; a drop-in that is not TOML is refused
// before anything is written, and one containerd refuses to start with is
// rolled back with nothing changed; removing the platform gives the node
// back as it was.
func TestUserDropInLive(t *testing.T) {
	ctr := containerdVersion(t, "2.4.2")
	p, err := platform.Parse("kubeadm-qemu-none")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	d := critest.NewDirs(t)
	writeFile(t, filepath.Join(root, "etc/containerd/config.toml"), critest.BaseConfig(d, 3, ""))
	rt, _ := unitRuntime(t, ctr, root, d)
	fsys, err := hostfs.OpenWritable(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	original := snapshotTree(t, root)
	target := configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 3, Containerd: ctr.Version}
	apply := func(dropIn string) (*configure.LiveResult, error) {
		t.Helper()
		opt := configure.Options{}
		if dropIn != "" {
			opt.ContainerdUserDropIn = []byte(dropIn)
		}
		r, err := configure.Render(p, target, opt)
		if err != nil {
			return nil, err
		}
		return configure.ApplyLive(context.Background(), fsys, r, rt)
	}
	downloads := func() any {
		t.Helper()
		out, err := critest.RunOnRoot(t, ctr.Bin, root, d, "--config", "/etc/containerd/config.toml", "config", "dump")
		if err != nil {
			t.Fatalf("containerd config dump: %v\n%s", err, out)
		}
		var dump struct {
			Plugins map[string]map[string]any `toml:"plugins"`
		}
		if err := toml.Unmarshal(out, &dump); err != nil {
			t.Fatalf("config dump does not parse: %v", err)
		}
		return dump.Plugins["io.containerd.cri.v1.images"]["max_concurrent_downloads"]
	}
	live := func(what string) {
		t.Helper()
		hs, err := rt.Handlers(context.Background())
		if err != nil || !slices.Contains(hs, p.Handler()) || !slices.Contains(hs, "runc") {
			t.Errorf("%s: containerd's handlers %v (%v), want runc and %s", what, hs, err, p.Handler())
		}
	}
	userFile := filepath.Join(root, "etc/containerd/conf.d", configure.ContainerdUserDropInName)
	const dropIn = "[plugins.'io.containerd.cri.v1.images']\n  max_concurrent_downloads = 7\n"

	res, err := apply(dropIn)
	if err != nil {
		t.Fatalf("apply with the drop-in: %v", err)
	}
	if !res.Restarted || !slices.Contains(res.Changed, strings.TrimPrefix(userFile, root+"/")) {
		t.Errorf("apply: restarted %v, changed %v; want a restart and %s", res.Restarted, res.Changed, userFile)
	}
	live("with the drop-in")
	if got := downloads(); got != int64(7) {
		t.Errorf("config dump: max_concurrent_downloads = %v (%T), want the drop-in's 7", got, got)
	}
	withDropIn := snapshotTree(t, root)
	if b, err := os.ReadFile(userFile); err == nil {
		t.Logf("%s:\n%s", userFile, b)
	}

	t.Run("not TOML", func(t *testing.T) {
		_, err := apply("[plugins\nmax = 1\n")
		if err == nil || !strings.Contains(err.Error(), "line 1: not TOML") {
			t.Fatalf("a drop-in that is not TOML: %v, want a refusal naming its line", err)
		}
		if now := snapshotTree(t, root); !maps.Equal(now, withDropIn) {
			t.Error("a refused drop-in changed the node's files")
		}
	})
	t.Run("containerd refuses it", func(t *testing.T) {
		_, err := apply("oom_score = \"high\"\n")
		if err == nil || !configure.IsRefused(err) || !strings.Contains(err.Error(), "put the previous files back") {
			t.Fatalf("a drop-in containerd cannot load: %v, want a rollback", err)
		}
		t.Logf("the refusal a user sees:\n%v", err)
		if now := snapshotTree(t, root); !maps.Equal(now, withDropIn) {
			t.Error("after the rollback the node's files differ from before the broken drop-in")
		}
		live("after the rollback")
		if got := downloads(); got != int64(7) {
			t.Errorf("after the rollback max_concurrent_downloads = %v, want 7", got)
		}
	})

	// Taken away: the file goes, the handler stays.
	if _, err := apply(""); err != nil {
		t.Fatalf("apply without the drop-in: %v", err)
	}
	if _, err := os.Stat(userFile); !os.IsNotExist(err) {
		t.Errorf("%s left after the drop-in was taken away (%v)", userFile, err)
	}
	live("without the drop-in")
	if got := downloads(); got == int64(7) {
		t.Errorf("max_concurrent_downloads still 7 without the drop-in")
	}
	if _, err := apply(dropIn); err != nil {
		t.Fatalf("apply with the drop-in again: %v", err)
	}
	if _, err := configure.RemoveLive(context.Background(), fsys, p.Handler(), rt); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if now := snapshotTree(t, root); !maps.Equal(now, original) {
		var diff []string
		for _, m := range []map[string]string{now, original} {
			for k := range m {
				if now[k] != original[k] && !slices.Contains(diff, k) {
					diff = append(diff, k)
				}
			}
		}
		t.Errorf("after remove the tree differs from before in %v", diff)
	}
}
