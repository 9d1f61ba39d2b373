//go:build linux

package configure_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/testsystemd"
	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

// unitRuntime runs a real containerd on root as a node's
// containerd.service (critest.StartOnRoot), under the systemctl and
// journalctl stand-ins of testsystemd, and returns the runtime berth
// drives there: restarted with systemctl, asked over CRI, its journal
// read when a restart broke it.
func unitRuntime(t *testing.T, ctr critest.Containerd, root string, dirs critest.Dirs) (runtimectl.Runtime, *testsystemd.Systemctl) {
	t.Helper()
	var cur *critest.Daemon
	var log string
	sc := testsystemd.StartSystemctl(t, t.TempDir(), testsystemd.Unit{
		Name: "containerd.service",
		Start: func() error {
			dm, err := critest.StartOnRoot(t, ctr.Bin, root, dirs)
			if err != nil {
				// As systemd would: why it is broken is in its log.
				cur, log = nil, err.Error()
				return err
			}
			cur, log = dm, dm.Log()
			return nil
		},
		Stop: func() {
			if cur != nil {
				cur.Stop()
			}
		},
		Log: func() string { return log },
	})
	live, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	run := runtimectl.OnHost(live, time.Minute)
	return runtimectl.Runtime{
		Units:   runtimectl.Systemctl{Run: run, Path: sc.Path("systemctl")},
		Unit:    "containerd.service",
		Ask:     cri.Ask(dirs.Sock),
		Journal: runtimectl.Journal{Run: run, Path: sc.Path("journalctl")}.Log,
		Wait:    5 * time.Second,
	}, sc
}

func containerdVersion(t *testing.T, version string) critest.Containerd {
	t.Helper()
	for _, c := range critest.Containerds(t) {
		if c.Version == version {
			return c
		}
	}
	t.Fatalf("no containerd %s in BERTH_CONTAINERDS", version)
	return critest.Containerd{}
}

// TestApplyLiveRollsBack: apply --restart on Debian 12's packaged config
// and containerd 1.6 keeps runc and adds the handler; a change that breaks
// the runtime (the handler written as if for containerd 2.x, without
// restating runc: the bug 1.6 users met) is rolled back, the runtime
// restarted and the old handlers proven live again, and the error says
// what broke.
func TestApplyLiveRollsBack(t *testing.T) {
	ctr := containerdVersion(t, "1.6.20")
	orig, err := os.ReadFile(upstreamtest.Path(t, "runtime-configs", "containerd-1.6.20-debian12-etc-containerd-config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	// Not a nydus platform: its snapshotter's service is the subject of
	// runtimectl's TestNydusServiceLive, this is the runtime's restart.
	p, err := platform.Parse("kubeadm-qemu-none")
	if err != nil {
		t.Fatal(err)
	}
	target := func(containerd string) configure.Target {
		l := platform.Layouts()["kubeadm"]
		return configure.Target{LayoutName: "kubeadm", Layout: l, ConfigVersion: 2, Containerd: containerd}
	}
	setup := func(t *testing.T) (string, runtimectl.Runtime, *testsystemd.Systemctl, *hostfs.Writable) {
		root := t.TempDir()
		main := filepath.Join(root, "etc/containerd/config.toml")
		if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(main, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		// The unit starts on the unchanged config, or the test fails.
		rt, sc := unitRuntime(t, ctr, root, critest.NewDirs(t))
		w, err := hostfs.OpenWritable(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return main, rt, sc, w
	}

	t.Run("apply and remove", func(t *testing.T) {
		main, rt, sc, w := setup(t)
		r, err := configure.Render(p, target(ctr.Version), configure.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := configure.ApplyLive(context.Background(), w, r, rt)
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		if !res.Restarted || !slices.Contains(res.Before, "runc") || !slices.Contains(res.After, "runc") || !slices.Contains(res.After, p.Handler()) {
			t.Errorf("apply: restarted %v, before %v, after %v", res.Restarted, res.Before, res.After)
		}
		n := sc.Restarts(rt.Unit)
		if res, err := configure.ApplyLive(context.Background(), w, r, rt); err != nil || res.Restarted || len(res.Changed) != 0 || sc.Restarts(rt.Unit) != n {
			t.Errorf("second apply: %+v, %v, restarts %d -> %d", res, err, n, sc.Restarts(rt.Unit))
		}
		res, err = configure.RemoveLive(context.Background(), w, p.Handler(), rt)
		if err != nil {
			t.Fatalf("remove: %v", err)
		}
		if slices.Contains(res.After, p.Handler()) || !slices.Contains(res.After, "runc") {
			t.Errorf("remove: after %v", res.After)
		}
		if got, _ := os.ReadFile(main); string(got) != string(orig) {
			t.Errorf("remove did not restore the config:\n%s", got)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(main), "../../var")); !os.IsNotExist(err) {
			t.Errorf("var/ left behind after the last remove: %v", err)
		}
	})

	t.Run("a change that breaks containerd is rolled back", func(t *testing.T) {
		main, rt, _, w := setup(t)
		// A node whose facts wrongly said containerd 2.1: no runc is
		// restated, and 1.6 then refuses to load its CRI plugin.
		r, err := configure.Render(p, target("2.1.9"), configure.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := configure.ApplyLive(context.Background(), w, r, rt)
		if err == nil || !configure.IsRefused(err) {
			t.Fatalf("a breaking apply was not refused: %v", err)
		}
		t.Logf("the refusal a user sees:\n%v", err)
		// What containerd 1.6 itself logged says why.
		for _, want := range []string{"containerd.service", "put the previous files back", "live again", "runc",
			"failed to load plugin io.containerd.grpc.v1.cri", "no corresponding runtime configured"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error does not say %q:\n%v", want, err)
			}
		}
		if got, _ := os.ReadFile(main); string(got) != string(orig) {
			t.Errorf("config not restored:\n%s", got)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(main), "../../var")); !os.IsNotExist(err) {
			t.Errorf("state left behind after a rolled-back first apply: %v", err)
		}
		if hs, err := rt.Handlers(context.Background()); err != nil || !slices.Contains(hs, "runc") || slices.Contains(hs, p.Handler()) {
			t.Errorf("after the rollback containerd has %v (%v)", hs, err)
		}
		if !slices.Contains(res.After, "runc") {
			t.Errorf("result after rollback: %v", res.After)
		}
	})
}
