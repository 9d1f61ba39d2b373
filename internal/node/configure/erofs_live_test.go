package configure_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/platform"
)

// TestErofsLive applies an erofs platform for each containerd 2.1+ of the
// suite (2.1.9, 2.2.9, 2.4.2) on a kubeadm root and asks the real
// containerd what it made of it: CRI runs and the handler names the erofs
// snapshotter, the introspection service lists the erofs snapshotter
// loaded (ok) and the erofs differ, ok or with the reason it was skipped
// (logged: 2.2+ skips it when mkfs.erofs has no --tar, as Debian 12's
// erofs-utils 1.5), and `containerd config dump` has the diff service on
// containerd's own [walking], which a skipped differ cannot break.
// After remove the handler is gone.
func TestErofsLive(t *testing.T) {
	p, err := platform.Parse("kubeadm-qemu-none+erofs")
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, c := range critest.Containerds(t) {
		if c.Major() < 2 || c.Major() == 2 && c.Minor() < 1 {
			continue // no erofs snapshotter: refused (TestErofsNeedsContainerd21)
		}
		ran = append(ran, c.Version)
		t.Run(c.Version, func(t *testing.T) {
			root := t.TempDir()
			d := critest.NewDirs(t)
			writeFile(t, filepath.Join(root, "etc/containerd/config.toml"), critest.BaseConfig(d, 3, ""))
			fsys, err := hostfs.OpenWritable(root)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			target := configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 3, Containerd: c.Version}
			r, err := configure.Render(p, target, configure.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := configure.Apply(fsys, r); err != nil {
				t.Fatal(err)
			}
			if got := differs(t, c, root, d); !slices.Equal(got, []string{"walking"}) {
				t.Errorf("after apply the diff service's differs are %v, want containerd's [walking]", got)
			}
			dm, err := critest.StartOnRoot(t, c.Bin, root, d)
			if err != nil {
				t.Fatal(err)
			}
			if h := dm.Status.Handlers[p.Handler()]; h.Snapshotter != "erofs" {
				t.Errorf("handler %s: snapshotter %q, want erofs", p.Handler(), h.Snapshotter)
			}
			ps, err := cri.Plugins(context.Background(), d.Sock, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, typ := range []string{cri.SnapshotterType, "io.containerd.differ.v1"} {
				line, ok := plugin(ps, typ, "erofs")
				if !ok {
					t.Errorf("containerd %s lists no %s erofs", c.Version, typ)
				}
				if typ == cri.SnapshotterType && !strings.HasSuffix(line, " ok") {
					t.Errorf("containerd %s: %s, want ok", c.Version, line)
				}
				t.Logf("containerd %s: %s", c.Version, line)
			}
			dm.Stop()

			if _, err := configure.Remove(fsys, p.Handler()); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(root, "etc/containerd/conf.d")); !os.IsNotExist(err) {
				t.Errorf("berth's drop-in directory is left after remove (%v)", err)
			}
			dm, err = critest.StartOnRoot(t, c.Bin, root, d)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := dm.Status.Handlers[p.Handler()]; ok {
				t.Errorf("handler %s still there after remove", p.Handler())
			}
		})
	}
	if len(ran) < 3 {
		t.Errorf("ran on containerd %v: the suite has 2.1.9, 2.2.9 and 2.4.2 (BERTH_CONTAINERDS)", ran)
	}
}

// differs is the diff service's default differs in the config containerd
// c would run with on root (`containerd config dump`, imports merged).
func differs(t *testing.T, c critest.Containerd, root string, d critest.Dirs) []string {
	t.Helper()
	out, err := critest.RunOnRoot(t, c.Bin, root, d, "--config", "/etc/containerd/config.toml", "config", "dump")
	if err != nil {
		t.Fatalf("containerd %s config dump: %v\n%s", c.Version, err, out)
	}
	var dump struct {
		Plugins map[string]struct {
			Default []string `toml:"default"`
		} `toml:"plugins"`
	}
	if err := toml.Unmarshal(out, &dump); err != nil {
		t.Fatalf("containerd %s config dump does not parse: %v\n%s", c.Version, err, out)
	}
	return dump.Plugins["io.containerd.service.v1.diff-service"].Default
}

// plugin is what `ctr plugins ls` says of one plugin: "TYPE ID ok" or the
// reason it did not load.
func plugin(ps []cri.Plugin, typ, id string) (string, bool) {
	for _, p := range ps {
		if p.Type == typ && p.ID == id {
			if p.Err != "" {
				return strings.Join([]string{typ, id, "error:", p.Err}, " "), true
			}
			return typ + " " + id + " ok", true
		}
	}
	return typ + " " + id + " not listed", false
}
