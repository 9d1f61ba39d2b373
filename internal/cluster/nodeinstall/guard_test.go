//go:build linux

package nodeinstall

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/podguard"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/internal/testkit/testnode"
	"berth.dev/berth/internal/testkit/treetest"
	"berth.dev/berth/platform"
)

// nodeWithPod is a TDX kubeadm node named name with kubeadm-qemu-none and
// kubeadm-qemu-tdx (both, returned) installed, and pod, a pod running on
// kata-qemu in the second containerd pods.
func nodeWithPod(t *testing.T, name string) (n *node, both []platform.Platform, pods *testnode.Node, pod string) {
	t.Helper()
	n = newNode(t, name, "tdx-emr-kubeadm-ready", "1.7.35")
	both = mustPlatforms(t, "kubeadm-qemu-none", "kubeadm-qemu-tdx")
	if _, err := n.installer(t, both, true).Run(context.Background(), ModeInstall); err != nil {
		t.Fatalf("install of both: %v", err)
	}
	dir := t.TempDir()
	pods = testnode.StartSandboxHandlers(t, dir, filepath.Join(dir, "marker"))
	return n, both, pods, pods.RunPod(t, "kata-qemu", "shop", "web-0")
}

// TestRemovalGuard is issue #41's guard on the node-installer: with a pod
// running on kata-qemu, neither dropping kubeadm-qemu-none from the list
// nor cleanup removes anything (refused, exit class refused, the host
// unchanged, the handler still live, a BerthRemovalBlocked Event naming
// the pod); a runtime that cannot be asked is refused too; ForceRemove
// removes and says what it overrode, and the pod keeps running. The pods
// are listed over CRI from a second real containerd whose kata-qemu runs
// on runc's shim (the node's own containerd runs in a namespace whose
// /opt hides the installed shim, so no sandbox of berth's handlers can
// start on it); the installer asks it as it asks the node's.
func TestRemovalGuard(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	dyn := dynClient(t)
	n, both, pods, pod := nodeWithPod(t, "ni-guard")
	listed := func(ctx context.Context, _ platform.Layout, handlers []string) ([]podguard.Pod, error) {
		return cri.Endpoint{Path: pods.ContainerdSocket}.RunningPods(ctx, handlers, 10*time.Second)
	}
	guarded := func(plats []platform.Platform, force bool, ask func(context.Context, platform.Layout, []string) ([]podguard.Pod, error)) *Installer {
		in := n.installer(t, plats, true)
		in.cfg.Pods, in.cfg.ForceRemove = ask, force
		return in
	}
	tdxOnly := mustPlatforms(t, "kubeadm-qemu-tdx")
	unreachable := func(context.Context, platform.Layout, []string) ([]podguard.Pod, error) {
		return nil, errors.New("connection refused")
	}
	for _, tc := range []struct {
		name  string
		plats []platform.Platform
		mode  Mode
		ask   func(context.Context, platform.Layout, []string) ([]podguard.Pod, error)
		want  string
	}{
		{"dropping the pod's platform", tdxOnly, ModeInstall, listed, "1 pod runs on handler kata-qemu on this node: shop/web-0"},
		{"cleanup", both, ModeCleanup, listed, "on handlers kata-qemu, kata-qemu-tdx on this node: shop/web-0"},
		{"runtime that cannot be asked", tdxOnly, ModeInstall, unreachable, "could not be asked which pods run on handler kata-qemu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			content := treetest.Content(t, n.root)
			restarts := n.sup.Restarts("containerd.service")
			rep, err := guarded(tc.plats, false, tc.ask).Run(ctx, tc.mode)
			if !errdefs.IsRefused(err) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), ForceRemoveFlag) {
				t.Fatalf("run: %v, want a refusal with %q naming %s", err, tc.want, ForceRemoveFlag)
			}
			if d := diffLines(content, treetest.Content(t, n.root)); d != "" {
				t.Errorf("the refused run changed the host:\n%s", d)
			}
			if n.sup.Restarts("containerd.service") != restarts {
				t.Error("the refused run restarted containerd")
			}
			if _, ok := n.handlers(t)["kata-qemu"]; !ok {
				t.Error("kata-qemu not live after a refused removal")
			}
			if strings.Contains(tc.want, "shop/web-0") && (rep == nil || len(rep.Blocked) != 1 || rep.Blocked[0].String() != "shop/web-0") {
				t.Errorf("report's blocked pods: %+v", rep.Blocked)
			}
			found := false
			for _, ev := range nodeEvents(t, dyn, n.name)[ReasonRemovalBlocked] {
				found = found || strings.Contains(ev.Message, tc.want)
			}
			if !found {
				t.Errorf("no %s Event saying %q: %+v", ReasonRemovalBlocked, tc.want, nodeEvents(t, dyn, n.name)[ReasonRemovalBlocked])
			}
		})
	}
	t.Run("forced", func(t *testing.T) {
		rep, err := guarded(tdxOnly, true, listed).Run(ctx, ModeInstall)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(rep.Forced, "shop/web-0") || !strings.HasPrefix(rep.Forced, ForceRemoveFlag) {
			t.Errorf("the report does not say what was forced: %q", rep.Forced)
		}
		if _, ok := n.handlers(t)["kata-qemu"]; ok {
			t.Error("kata-qemu still live after the forced removal")
		}
		if st := pods.PodState(t, pod); st != "SANDBOX_READY" {
			t.Errorf("the pod is %s after the forced removal: berth stops no pod", st)
		}
	})
	t.Run("nothing runs on what cleanup removes", func(t *testing.T) {
		if _, err := guarded(tdxOnly, false, listed).Run(ctx, ModeCleanup); err != nil {
			t.Fatalf("cleanup with no pod on kata-qemu-tdx: %v", err)
		}
	})
}

// TestUpgradeKeepsPods is kata issue #12761 the other way round: a chart
// change that keeps a platform removes nothing of it, so its pods are
// never in the way and never touched. With a pod running on kata-qemu
// (kubeadm-qemu-none's handler), an upgrade to another release with the
// same platforms installs without asking for pods at all, and dropping
// the other platform (TDX) asks only about kata-qemu-tdx and goes ahead;
// the pod runs on throughout. As in TestRemovalGuard, the pod runs on a
// second real containerd that the installer asks as it asks the node's.
func TestUpgradeKeepsPods(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	n, both, pods, pod := nodeWithPod(t, "ni-upgrade-pods")
	var asked [][]string
	guarded := func(plats []platform.Platform) *Installer {
		in := n.installer(t, plats, true)
		in.cfg.Pods = func(ctx context.Context, _ platform.Layout, handlers []string) ([]podguard.Pod, error) {
			asked = append(asked, handlers)
			return cri.Endpoint{Path: pods.ContainerdSocket}.RunningPods(ctx, handlers, 10*time.Second)
		}
		return in
	}

	upgrade := guarded(both)
	upgrade.cfg.Manifest = newTestReleaseVersion(t, "2.0.0").Manifest
	rep, err := upgrade.Run(ctx, ModeInstall)
	if err != nil {
		t.Fatalf("upgrade with the same platforms: %v", err)
	}
	if !rep.Installed || len(asked) != 0 || len(rep.Blocked) != 0 {
		t.Errorf("upgrade: installed %v, asked for pods on %v, blocked %v; want the new release installed and nothing asked", rep.Installed, asked, rep.Blocked)
	}
	if _, ok := n.handlers(t)["kata-qemu"]; !ok {
		t.Error("kata-qemu not live after the upgrade")
	}
	if st := pods.PodState(t, pod); st != "SANDBOX_READY" {
		t.Errorf("the pod is %s after the upgrade", st)
	}

	rep, err = guarded(mustPlatforms(t, "kubeadm-qemu-none")).Run(ctx, ModeInstall)
	if err != nil {
		t.Fatalf("dropping TDX while a pod runs on kata-qemu: %v", err)
	}
	if len(asked) != 1 || len(asked[0]) != 1 || asked[0][0] != "kata-qemu-tdx" || len(rep.Blocked) != 0 {
		t.Errorf("dropping TDX asked about %v (blocked %v), want kata-qemu-tdx alone", asked, rep.Blocked)
	}
	hs := n.handlers(t)
	if _, ok := hs["kata-qemu-tdx"]; ok {
		t.Error("kata-qemu-tdx still live after it was dropped")
	}
	if _, ok := hs["kata-qemu"]; !ok {
		t.Error("kata-qemu lost when TDX was dropped")
	}
	if st := pods.PodState(t, pod); st != "SANDBOX_READY" {
		t.Errorf("the pod is %s after TDX was dropped", st)
	}
}
