//go:build linux

package configure_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

// daemonRuntime is configure.Runtime over a real containerd that the test
// starts on a root as a node's unit would (critest.StartOnRoot): Restart
// kills it and starts it again on whatever the files now say.
type daemonRuntime struct {
	t    *testing.T
	ctr  critest.Containerd
	root string
	dirs critest.Dirs
	cur  *critest.Daemon
	log  string
	// restarts counts Restart calls.
	restarts int
}

func (d *daemonRuntime) Name() string { return "containerd " + d.ctr.Version }

func (d *daemonRuntime) Restart(context.Context) error {
	d.restarts++
	if d.cur != nil {
		d.cur.Stop()
		d.cur = nil
	}
	dm, err := critest.StartOnRoot(d.t, d.ctr.Bin, d.root, d.dirs)
	if err != nil {
		// As systemctl would: the unit started; why it is broken is in
		// its log.
		d.log = err.Error()
		return errors.New(firstLine(err.Error()))
	}
	d.cur, d.log = dm, dm.Log()
	return nil
}

func (d *daemonRuntime) Handlers(context.Context) ([]string, error) {
	if d.cur == nil {
		return nil, os.ErrNotExist
	}
	st, err := d.cur.Query()
	if err != nil {
		return nil, err
	}
	return st.Names(), nil
}

func (d *daemonRuntime) Log(context.Context) string { return configure.ProblemLines(d.log, 10) }

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
	p, err := platform.Parse("kubeadm-qemu-snp")
	if err != nil {
		t.Fatal(err)
	}
	target := func(containerd string) configure.Target {
		l := platform.Layouts()["kubeadm"]
		return configure.Target{LayoutName: "kubeadm", Layout: l, ConfigVersion: 2, Containerd: containerd}
	}
	setup := func(t *testing.T) (string, *daemonRuntime, *configure.OSRoot) {
		root := t.TempDir()
		main := filepath.Join(root, "etc/containerd/config.toml")
		if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(main, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		rt := &daemonRuntime{t: t, ctr: ctr, root: root, dirs: critest.NewDirs(t)}
		if err := rt.Restart(context.Background()); err != nil {
			t.Fatalf("the unchanged config does not run: %v", err)
		}
		w, err := configure.OpenOSRoot(root)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return main, rt, w
	}

	t.Run("apply and remove", func(t *testing.T) {
		main, rt, w := setup(t)
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
		n := rt.restarts
		if res, err := configure.ApplyLive(context.Background(), w, r, rt); err != nil || res.Restarted || len(res.Changed) != 0 || rt.restarts != n {
			t.Errorf("second apply: %+v, %v, restarts %d -> %d", res, err, n, rt.restarts)
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
		main, rt, w := setup(t)
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
		for _, want := range []string{"containerd 1.6.20", "put the previous files back", "live again", "runc",
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
