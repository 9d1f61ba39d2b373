package nodeinstall

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/runtimectl/systemdbus"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/internal/testkit/testsystemd"
	"berth.dev/berth/platform"
)

// setTaints gives the node these taints, as kubelet's
// --register-with-taints and other controllers would.
func setTaints(t *testing.T, dyn dynamic.Interface, name string, taints []corev1.Taint) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(nodesResource).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
}

// nodeTaints are the node's taints and resourceVersion.
func nodeTaints(t *testing.T, dyn dynamic.Interface, name string) ([]corev1.Taint, string) {
	t.Helper()
	in := &Installer{cfg: Config{NodeName: name}, dyn: dyn}
	node, err := in.getNode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return node.Spec.Taints, node.ResourceVersion
}

// TestStartupTaint: the startup taint (key and effect) leaves the node
// with the run that installs every platform, and nothing else does: the
// node's other taints, one with the same key but another effect among
// them, stay; a failed install, or a platform not ready, keeps it; a node without it gets no write.
func TestStartupTaint(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	dyn := dynClient(t)
	st, err := ParseStartupTaint("berth.dev/runtime-not-ready:NoSchedule")
	if err != nil {
		t.Fatal(err)
	}
	others := []corev1.Taint{
		{Key: "berth.dev/runtime-not-ready", Effect: corev1.TaintEffectNoExecute},
		{Key: "example.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
	}
	tainted := append([]corev1.Taint{st.Taint}, others...)

	t.Run("failed install keeps it", func(t *testing.T) {
		n := &node{name: "ni-taint-fail", root: copyFixture(t, "tdx-emr-kubeadm-ready"), dirs: critest.NewDirs(t), rel: newTestRelease(t), startupTaints: []*StartupTaint{st}}
		sock := filepath.Join(n.root, systemdbus.PrivateSocket)
		if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
			t.Fatal(err)
		}
		n.sup = testsystemd.Start(t, sock, testsystemd.Unit{Name: "docker.service", Start: func() error { return nil }, Stop: func() {}})
		createNode(t, dyn, n.name, nil)
		setTaints(t, dyn, n.name, tainted)
		rep, err := n.installer(t, mustPlatforms(t, "kubeadm-qemu-none"), false).Run(ctx, ModeInstall)
		if err == nil {
			t.Fatal("install without a running containerd succeeded")
		}
		if got, _ := nodeTaints(t, dyn, n.name); !reflect.DeepEqual(got, tainted) {
			t.Errorf("taints after a failed install: %+v; want %+v", got, tainted)
		}
		if rep != nil && rep.TaintRemoved {
			t.Error("report says the taint was removed")
		}
	})

	t.Run("platform not ready keeps it", func(t *testing.T) {
		root := copyFixture(t, "cloud-vm-no-nested")
		createNode(t, dyn, "ni-taint-notready", nil)
		setTaints(t, dyn, "ni-taint-notready", tainted)
		hostRoot, err := hostfs.OpenDir(root)
		if err != nil {
			t.Fatal(err)
		}
		in, err := New(Config{
			NodeName: "ni-taint-notready", Root: hostRoot, Writable: writable(t, root), Install: configure.Install{Prefix: "/opt/berth"},
			Platforms: mustPlatforms(t, "kubeadm-qemu-none"),
			Manifest:  newTestRelease(t).Manifest, Fetcher: fetch.New(nil, ""),
			Discover: discover.Options{Now: time.Now},
			Runtime: func(context.Context, platform.Layout) (configure.Runtime, error) {
				return nil, os.ErrNotExist
			},
			StartupTaints: []*StartupTaint{st},
		}, clientAs(t, "berth-node-installer-test", installerRules))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := in.Run(ctx, ModeInstall)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Platforms) != 1 || rep.Platforms[0].Status != StatusNotReady || rep.TaintRemoved {
			t.Errorf("report: %+v, taint removed %v", rep.Platforms, rep.TaintRemoved)
		}
		if got, _ := nodeTaints(t, dyn, "ni-taint-notready"); !reflect.DeepEqual(got, tainted) {
			t.Errorf("taints after a run with a platform not ready: %+v; want %+v", got, tainted)
		}
	})

	t.Run("installed removes only it", func(t *testing.T) {
		n := newNode(t, "ni-taint", "tdx-emr-kubeadm-ready", "1.7.35")
		n.startupTaints = []*StartupTaint{st}
		setTaints(t, dyn, n.name, tainted)
		plats := mustPlatforms(t, "kubeadm-qemu-none")
		rep, err := n.installer(t, plats, false).Run(ctx, ModeInstall)
		if err != nil {
			t.Fatalf("install: %v", err)
		}
		if !rep.TaintRemoved {
			t.Error("report does not say the taint was removed")
		}
		got, rv := nodeTaints(t, dyn, n.name)
		if !reflect.DeepEqual(got, others) {
			t.Errorf("taints after the install: %+v; want %+v", got, others)
		}

		// Without the taint, a rerun writes nothing at all.
		rep, err = n.installer(t, plats, false).Run(ctx, ModeInstall)
		if err != nil {
			t.Fatalf("rerun: %v", err)
		}
		if rep.TaintRemoved {
			t.Error("rerun reports removing an absent taint")
		}
		if got, rv2 := nodeTaints(t, dyn, n.name); rv2 != rv || !reflect.DeepEqual(got, others) {
			t.Errorf("rerun wrote the node (resourceVersion %s -> %s), taints %+v", rv, rv2, got)
		}
	})

	// kata-deploy's startupTaints list: several taints, a bare key among
	// them matching that key's taints of every effect and value.
	t.Run("several, one a bare key", func(t *testing.T) {
		bare, err := ParseStartupTaint("example.com/kata-not-ready")
		if err != nil {
			t.Fatal(err)
		}
		n := newNode(t, "ni-taints", "tdx-emr-kubeadm-ready", "1.7.35")
		n.startupTaints = []*StartupTaint{st, bare}
		setTaints(t, dyn, n.name, append(slices.Clone(tainted),
			corev1.Taint{Key: "example.com/kata-not-ready", Effect: corev1.TaintEffectNoExecute},
			corev1.Taint{Key: "example.com/kata-not-ready", Value: "true", Effect: corev1.TaintEffectNoSchedule}))
		rep, err := n.installer(t, mustPlatforms(t, "kubeadm-qemu-none"), false).Run(ctx, ModeInstall)
		if err != nil {
			t.Fatalf("install: %v", err)
		}
		if got, _ := nodeTaints(t, dyn, n.name); !rep.TaintRemoved || !reflect.DeepEqual(got, others) {
			t.Errorf("taints after the install: %+v (removed %v); want %+v", got, rep.TaintRemoved, others)
		}
	})
}
