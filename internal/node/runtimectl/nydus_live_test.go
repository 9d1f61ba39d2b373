//go:build linux

package runtimectl_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/testsystemd"
	"berth.dev/berth/platform"
)

// nydusNode is a kubeadm host root whose containerd.service is a real
// containerd 2.x and whose berth-nydus-snapshotter.service runs what the
// unit file berth wrote there says (its ExecStart, with the host paths
// mapped into the root): systemd knows the unit only once a reload found
// that file, as on a real host.
type nydusNode struct {
	*liveNode
	nydus testsystemd.Unit
	// bin is where the unit's ExecStart finds containerd-nydus-grpc
	// (berth install puts it there).
	bin string
	svc critest.Service
}

func newNydusNode(t *testing.T) *nydusNode {
	t.Helper()
	n := &nydusNode{liveNode: startableNode(t, "BERTH_CONTAINERD2", func(d critest.Dirs) string { return critest.BaseConfig(d, 3, "") })}
	n.bin = filepath.Join(n.root, strings.TrimPrefix(configure.NydusNamesFor(configure.Paths{}).Binary, "/"))
	n.nydus = testsystemd.Unit{
		Name:     configure.NydusUnit,
		Inactive: true,
		File:     filepath.Join(n.root, configure.SystemdUnitDir, configure.NydusUnit),
		// As the unit says, its state under the test root.
		Start: func() error {
			return n.svc.Start(n.root, filepath.Join(n.root, configure.SystemdUnitDir, configure.NydusUnit),
				"--root", filepath.Join(n.root, "var/lib", configure.NydusProxy))
		},
		Stop: n.svc.Stop,
		Log:  n.svc.Log,
	}
	t.Cleanup(n.svc.Stop)
	return n
}

// install puts the nydus-snapshotter binary src where the unit runs it.
func (n *nydusNode) install(t *testing.T, src string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(n.bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestNydusServiceLive is the transactional apply of a nydus platform
// with both mechanisms, on containerd 2.4 and nydus-snapshotter 0.16.1
// (.ci/tools.sh): the apply reloads systemd, enables and starts
// berth-nydus-snapshotter.service before containerd restarts once, and
// containerd lists berth-nydus over its introspection API and prepares a
// snapshot through it; remove stops and disables the unit, removes every
// file and restores the config byte for byte, and containerd has no such
// snapshotter after its restart. A snapshotter that does not start is
// rolled back before containerd is restarted (its log in the error), and
// one that starts but never serves its socket is rolled back after the
// restart proved it dead (containerd restarted again, the unit stopped
// and disabled, the files back).
func TestNydusServiceLive(t *testing.T) {
	testkit.NeedsTools(t, "containerd-nydus-grpc (BERTH_NYDUS_SNAPSHOTTER)")
	nydusBin := os.Getenv("BERTH_NYDUS_SNAPSHOTTER")
	if nydusBin == "" {
		t.Fatal("BERTH_NYDUS_SNAPSHOTTER is not set: run `make tools` (.ci/tools.sh) and source .ci/tools.env")
	}
	p, err := platform.Parse("kubeadm-qemu-snp")
	if err != nil {
		t.Fatal(err)
	}
	if p.Snapshotter() != platform.Nydus {
		t.Fatalf("%s: snapshotter %s, want nydus", p, p.Snapshotter())
	}
	ctx := context.Background()
	render := func(t *testing.T) *configure.Rendered {
		r, err := configure.Render(p, configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 3, Containerd: "2.4.2"}, configure.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			setup := func(t *testing.T) (*nydusNode, started, configure.Runtime, *hostfs.Writable) {
				n := newNydusNode(t)
				s := m.start(t, n.unit, n.nydus)
				f := runtimectl.Finder{Units: s.units, Journal: s.journal,
					Ask: func(platform.Layout) runtimectl.Ask { return cri.Ask(n.dirs.Sock) },
					Snapshotter: func(platform.Layout) func(context.Context, string) error {
						return func(ctx context.Context, name string) error {
							return cri.ProveSnapshotter(ctx, n.dirs.Sock, name, 5*time.Second)
						}
					}}
				rt, err := f.Find(ctx, platform.Layouts()["kubeadm"])
				if err != nil {
					t.Fatal(err)
				}
				return n, s, rt, n.writable(t)
			}
			unchanged := func(t *testing.T, n *nydusNode, s started) {
				t.Helper()
				if got, _ := os.ReadFile(n.main); !bytes.Equal(got, n.orig) {
					t.Errorf("containerd's config is not as before:\n%s", got)
				}
				for _, f := range []string{n.nydus.File, filepath.Join(n.root, strings.TrimPrefix(configure.NydusNamesFor(configure.Paths{}).Config, "/")),
					filepath.Join(n.root, "etc/containerd/conf.d", configure.NydusProxy+".toml"), filepath.Join(n.root, configure.StatePath)} {
					if _, err := os.Lstat(f); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s is there (%v)", f, err)
					}
				}
				if s.enabled(configure.NydusUnit) || s.state(configure.NydusUnit) == "active" {
					t.Errorf("%s: enabled %v, %s; want disabled and not running", configure.NydusUnit, s.enabled(configure.NydusUnit), s.state(configure.NydusUnit))
				}
			}

			t.Run("apply and remove", func(t *testing.T) {
				n, s, rt, w := setup(t)
				n.install(t, nydusBin)
				r := render(t)
				res, err := configure.ApplyLive(ctx, w, r, rt)
				if err != nil {
					t.Fatalf("apply: %v\nnydus-snapshotter:\n%s", err, n.nydus.Log())
				}
				if !res.Restarted || !slices.Contains(res.After, r.Handler) {
					t.Errorf("apply: restarted %v, after %v", res.Restarted, res.After)
				}
				if got := s.restarts("containerd.service"); got != 1 {
					t.Errorf("containerd restarted %d times, want 1", got)
				}
				if !s.enabled(configure.NydusUnit) || s.state(configure.NydusUnit) != "active" {
					t.Errorf("%s after apply: enabled %v, %s", configure.NydusUnit, s.enabled(configure.NydusUnit), s.state(configure.NydusUnit))
				}
				if err := cri.ProveSnapshotter(ctx, n.dirs.Sock, configure.NydusProxy, 5*time.Second); err != nil {
					t.Errorf("after apply: %v", err)
				}
				ps, err := cri.Plugins(ctx, n.dirs.Sock, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("containerd 2.4.2 after apply lists %s", pluginLine(ps, cri.SnapshotterType, configure.NydusProxy))

				res, err = configure.RemoveLive(ctx, w, r.Handler, rt)
				if err != nil {
					t.Fatalf("remove: %v", err)
				}
				if slices.Contains(res.After, r.Handler) {
					t.Errorf("remove: handler still live: %v", res.After)
				}
				unchanged(t, n, s)
				if err := cri.ProveSnapshotter(ctx, n.dirs.Sock, configure.NydusProxy, 5*time.Second); !errors.Is(err, cri.ErrNoSnapshotter) {
					t.Errorf("after remove: %v, want no snapshotter %s", err, configure.NydusProxy)
				}
				if got := s.restarts("containerd.service"); got != 2 {
					t.Errorf("containerd restarted %d times, want 2", got)
				}
			})

			t.Run("a snapshotter that does not start is rolled back before the restart", func(t *testing.T) {
				n, s, rt, w := setup(t)
				broken := filepath.Join(t.TempDir(), "containerd-nydus-grpc")
				if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'level=fatal msg=\"failed to load config: broken on purpose\"'\nexit 1\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				n.install(t, broken)
				_, err := configure.ApplyLive(ctx, w, render(t), rt)
				if err == nil || !configure.IsRefused(err) {
					t.Fatalf("apply with a broken snapshotter: %v, want a refusal", err)
				}
				t.Logf("refused: %v", err)
				want := []string{configure.NydusUnit, "put the previous files back", "containerd.service was not restarted"}
				if s.journal != nil {
					want = append(want, configure.NydusUnit+" logged:", "broken on purpose")
				}
				for _, w := range want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not say %q:\n%v", w, err)
					}
				}
				if got := s.restarts("containerd.service"); got != 0 {
					t.Errorf("containerd restarted %d times, want 0", got)
				}
				unchanged(t, n, s)
			})

			t.Run("a snapshotter that never serves is rolled back after the restart", func(t *testing.T) {
				n, s, rt, w := setup(t)
				mute := filepath.Join(t.TempDir(), "containerd-nydus-grpc")
				if err := os.WriteFile(mute, []byte("#!/bin/sh\necho 'level=error msg=\"serving nothing on purpose\"'\nexec sleep 600\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				n.install(t, mute)
				res, err := configure.ApplyLive(ctx, w, render(t), rt)
				if err == nil || !configure.IsRefused(err) {
					t.Fatalf("apply with a snapshotter that never serves: %v, want a refusal", err)
				}
				t.Logf("refused: %v", err)
				for _, w := range []string{"snapshotter " + configure.NydusProxy + " is not live", "put the previous files back", "live again"} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not say %q:\n%v", w, err)
					}
				}
				if got := s.restarts("containerd.service"); got != 2 {
					t.Errorf("containerd restarted %d times, want 2 (the change, the rollback)", got)
				}
				unchanged(t, n, s)
				if err := cri.ProveSnapshotter(ctx, n.dirs.Sock, configure.NydusProxy, 5*time.Second); !errors.Is(err, cri.ErrNoSnapshotter) {
					t.Errorf("after the rollback: %v, want no snapshotter %s", err, configure.NydusProxy)
				}
				if hs, err := rt.Handlers(ctx); err != nil || !slices.Equal(hs, res.Before) {
					t.Errorf("after the rollback containerd has %v (%v), before %v", hs, err, res.Before)
				}
			})
		})
	}
}

// pluginLine is what `ctr plugins ls` prints of one plugin.
func pluginLine(ps []cri.Plugin, typ, id string) string {
	for _, p := range ps {
		if p.Type == typ && p.ID == id {
			st := "ok"
			if p.Err != "" {
				st = "error: " + p.Err
			}
			return fmt.Sprintf("%s %s %s", p.Type, p.ID, st)
		}
	}
	return typ + " " + id + " (not listed)"
}
