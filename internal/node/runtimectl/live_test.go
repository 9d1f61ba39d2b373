//go:build linux

package runtimectl_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/testsystemd"
	"berth.dev/berth/platform"
)

// liveNode is a host root whose containerd.service is a real containerd
// 1.x on the root's config (critest.StartOnRoot), as a unit the test's
// supervisor restarts.
type liveNode struct {
	root string
	dirs critest.Dirs
	main string
	orig []byte
	unit testsystemd.Unit
	// daemon is the containerd running now.
	daemon *critest.Daemon
	// log is what the last containerd started (or failed to) logged.
	log string
}

func newLiveNode(t *testing.T) *liveNode {
	t.Helper()
	return startableNode(t, "BERTH_CONTAINERD1", debianLike)
}

// startableNode is a liveNode whose containerd is the binary env names,
// on the main config config writes for its directories.
func startableNode(t *testing.T, env string, config func(critest.Dirs) string) *liveNode {
	t.Helper()
	bin := critest.ContainerdBin(t, env)
	n := &liveNode{root: testsystemd.ShortDir(t), dirs: critest.NewDirs(t)}
	n.main = filepath.Join(n.root, "etc/containerd/config.toml")
	n.orig = []byte(config(n.dirs))
	if err := os.MkdirAll(filepath.Dir(n.main), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.main, n.orig, 0o644); err != nil {
		t.Fatal(err)
	}
	n.unit = testsystemd.Unit{
		Name: "containerd.service",
		Start: func() error {
			dm, err := critest.StartOnRoot(t, bin, n.root, n.dirs)
			if err != nil {
				n.daemon, n.log = nil, err.Error()
				return err
			}
			n.daemon, n.log = dm, dm.Log()
			return nil
		},
		Stop: func() {
			if n.daemon != nil {
				n.daemon.Stop()
			}
		},
		Log: func() string { return n.log },
	}
	return n
}

// writable opens the node's root for configure, closed at the test's
// cleanup.
func (n *liveNode) writable(t *testing.T) *hostfs.Writable {
	t.Helper()
	w, err := hostfs.OpenWritable(n.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// debianLike is a main config shaped like Debian 12's packaged one: the
// CRI plugin's CNI paths and no runtimes, so that containerd 1.x runs its
// built-in runc, and a config that names runtimes without restating runc
// breaks it. Its root, state and sockets are the test's.
func debianLike(d critest.Dirs) string {
	base := critest.BaseConfig(d, 2, "")
	head, _, _ := strings.Cut(base, "\n[plugins.\"io.containerd.grpc.v1.cri\"]")
	return head + `
  [plugins."io.containerd.grpc.v1.cri"]
    stream_server_port = "0"
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "` + filepath.Join(d.Dir, "cni/bin") + `"
      conf_dir = "` + filepath.Join(d.Dir, "cni/conf") + `"
`
}

// render renders kubeadm-qemu-none for containerd version v on the node.
func render(t *testing.T, version string) *configure.Rendered {
	t.Helper()
	p, err := platform.Parse("kubeadm-qemu-none")
	if err != nil {
		t.Fatal(err)
	}
	r, err := configure.Render(p, configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 2, Containerd: version}, configure.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRestartAndProve runs the node-installer's transactional apply and
// remove (configure.ApplyLive through a Finder's runtime) on a real
// containerd with each mechanism: the handler goes live after one
// restart, a second apply restarts nothing, remove restores the config
// byte for byte, and a change that breaks containerd 1.x (the handler
// written as if for 2.x, without restating runc) is rolled back, the
// runtime restarted and runc proven live again, the error carrying what
// the journal said when there is one.
func TestRestartAndProve(t *testing.T) {
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			ctx := context.Background()
			setup := func(t *testing.T) (*liveNode, started, configure.Runtime, *hostfs.Writable) {
				n := newLiveNode(t)
				s := m.start(t, n.unit)
				f := runtimectl.Finder{Units: s.units, Journal: s.journal,
					Ask: func(platform.Layout) runtimectl.Ask { return cri.Ask(n.dirs.Sock) }}
				rt, err := f.Find(ctx, platform.Layouts()["kubeadm"])
				if err != nil {
					t.Fatal(err)
				}
				return n, s, rt, n.writable(t)
			}

			t.Run("apply and remove", func(t *testing.T) {
				n, s, rt, w := setup(t)
				r := render(t, "1.6.20")
				res, err := configure.ApplyLive(ctx, w, r, rt)
				if err != nil {
					t.Fatalf("apply: %v", err)
				}
				if !res.Restarted || !slices.Contains(res.Before, "runc") || !slices.Contains(res.After, "runc") || !slices.Contains(res.After, r.Handler) {
					t.Errorf("apply: restarted %v, before %v, after %v", res.Restarted, res.Before, res.After)
				}
				if got := s.restarts("containerd.service"); got != 1 {
					t.Errorf("%d restarts, want 1", got)
				}
				if name, version, err := rt.(runtimectl.Runtime).Running(ctx); err != nil || name != "containerd" || !strings.Contains(version, "1.6") {
					t.Errorf("Running = %s %s %v", name, version, err)
				}
				if res, err := configure.ApplyLive(ctx, w, r, rt); err != nil || res.Restarted || s.restarts("containerd.service") != 1 {
					t.Errorf("second apply: %+v, %v, %d restarts", res, err, s.restarts("containerd.service"))
				}
				res, err = configure.RemoveLive(ctx, w, r.Handler, rt)
				if err != nil {
					t.Fatalf("remove: %v", err)
				}
				if slices.Contains(res.After, r.Handler) || !slices.Contains(res.After, "runc") {
					t.Errorf("remove: after %v", res.After)
				}
				if got, _ := os.ReadFile(n.main); !bytes.Equal(got, n.orig) {
					t.Errorf("remove did not restore the config:\n%s", got)
				}
			})

			t.Run("a change that breaks containerd is rolled back", func(t *testing.T) {
				n, s, rt, w := setup(t)
				res, err := configure.ApplyLive(ctx, w, render(t, "2.1.9"), rt)
				if err == nil || !configure.IsRefused(err) {
					t.Fatalf("a breaking apply was not refused: %v", err)
				}
				want := []string{"containerd.service", "put the previous files back", "live again", "runc"}
				if s.journal != nil {
					// What containerd 1.6 itself logged says why.
					want = append(want, "containerd.service logged:", "failed to load plugin io.containerd.grpc.v1.cri")
				}
				for _, w := range want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not say %q:\n%v", w, err)
					}
				}
				if got, _ := os.ReadFile(n.main); !bytes.Equal(got, n.orig) {
					t.Errorf("config not restored:\n%s", got)
				}
				if got := s.restarts("containerd.service"); got != 2 {
					t.Errorf("%d restarts, want 2: the change and the rollback", got)
				}
				if hs, err := rt.Handlers(ctx); err != nil || !slices.Contains(hs, "runc") || !slices.Contains(res.After, "runc") {
					t.Errorf("after the rollback containerd has %v (%v), result %v", hs, err, res.After)
				}
			})
		})
	}
}
