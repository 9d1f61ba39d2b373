package configure_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/platform"
)

// TestNydusProxyLive applies a nydus platform on a kubeadm root, starts
// the nydus-snapshotter .ci/tools.sh built with the config and command
// line berth rendered (its unit's ExecStart) next to a real containerd on
// that root, and proves over containerd's introspection and snapshots
// services that berth-nydus is a loaded snapshotter that answers; after
// remove containerd has no such snapshotter. On containerd 1.7 (config
// version 2, the proxy plugin in a block of the main config) and the 2.x
// releases (version 3, its own drop-in).
func TestNydusProxyLive(t *testing.T) {
	testkit.NeedsTools(t, "containerd-nydus-grpc (BERTH_NYDUS_SNAPSHOTTER)")
	nydus := os.Getenv("BERTH_NYDUS_SNAPSHOTTER")
	if nydus == "" {
		t.Fatal("BERTH_NYDUS_SNAPSHOTTER is not set: run `make tools` (.ci/tools.sh) and source .ci/tools.env")
	}
	if _, err := os.Stat(nydus); err != nil {
		t.Fatal(err)
	}
	for _, c := range critest.Containerds(t) {
		if c.Major() == 1 && c.Minor() < 7 {
			continue // Debian's 1.6: the suite's other tests cover its config
		}
		v := 3
		if c.Major() == 1 {
			v = 2
		}
		t.Run(c.Version, func(t *testing.T) {
			root := t.TempDir()
			d := critest.NewDirs(t)
			writeFile(t, filepath.Join(root, "etc/containerd/config.toml"), critest.BaseConfig(d, v, ""))
			fsys, err := hostfs.OpenWritable(root)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			p, err := platform.Parse("kubeadm-qemu-snp")
			if err != nil {
				t.Fatal(err)
			}
			target := configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: v, Containerd: c.Version}
			r, err := configure.Render(p, target, configure.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := configure.Apply(fsys, r); err != nil {
				t.Fatal(err)
			}
			bin := wrapWithNydus(t, root, d, nydus, c.Bin)
			dm, err := critest.StartOnRoot(t, bin, root, d)
			if err != nil {
				t.Fatal(err)
			}
			if h := dm.Status.Handlers[p.Handler()]; h.Snapshotter != configure.NydusProxy {
				t.Errorf("handler %s: snapshotter %q, want %q", p.Handler(), h.Snapshotter, configure.NydusProxy)
			}
			var proveErr error
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				// nydus-snapshotter may come up after containerd.
				if proveErr = cri.ProveSnapshotter(context.Background(), d.Sock, configure.NydusProxy, 5*time.Second); proveErr == nil {
					break
				}
			}
			if proveErr != nil {
				t.Fatalf("after apply: %v\n%s", proveErr, readLog(d))
			}
			dm.Stop()

			if _, err := configure.Remove(fsys, p.Handler()); err != nil {
				t.Fatal(err)
			}
			if _, err := critest.StartOnRoot(t, c.Bin, root, d); err != nil {
				t.Fatal(err)
			}
			err = cri.ProveSnapshotter(context.Background(), d.Sock, configure.NydusProxy, 5*time.Second)
			if !errors.Is(err, cri.ErrNoSnapshotter) {
				t.Errorf("after remove: %v, want no snapshotter %s", err, configure.NydusProxy)
			}
		})
	}
}

// wrapWithNydus writes a script that starts nydus-snapshotter as the
// rendered unit's ExecStart says (the paths under berth's prefix mapped
// into root: containerd's namespace hides /opt) and then becomes
// containerd, so that both run in the namespace critest makes, where
// /run is private.
func wrapWithNydus(t *testing.T, root string, d critest.Dirs, nydus, containerd string) string {
	t.Helper()
	unit, err := os.ReadFile(filepath.Join(root, "etc/systemd/system", configure.NydusUnit))
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, l := range strings.Split(string(unit), "\n") {
		if rest, ok := strings.CutPrefix(l, "ExecStart="); ok {
			args = strings.Fields(rest)
		}
	}
	if len(args) == 0 || filepath.Base(args[0]) != "containerd-nydus-grpc" {
		t.Fatalf("unit has no ExecStart of containerd-nydus-grpc:\n%s", unit)
	}
	args[0] = nydus
	for i, a := range args[1:] {
		if strings.HasPrefix(a, configure.DefaultPrefix+"/") {
			args[i+1] = filepath.Join(root, a)
		}
	}
	script := fmt.Sprintf("#!/bin/sh\nmkdir -p %s\n%s >%s 2>&1 &\nexec %s \"$@\"\n",
		filepath.Dir(configure.NydusSocket), strings.Join(args, " "), filepath.Join(d.Dir, "nydus.log"), containerd)
	p := filepath.Join(d.Dir, "containerd-with-nydus")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func readLog(d critest.Dirs) string {
	b, _ := os.ReadFile(filepath.Join(d.Dir, "nydus.log"))
	return "nydus-snapshotter log:\n" + string(b)
}
