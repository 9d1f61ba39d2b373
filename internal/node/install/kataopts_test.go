package install

import (
	"berth.dev/berth/internal/testkit/treetest"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// TestRuntimeConfigKataOptions: install's applier gives each platform its
// own Kata options and applies its custom runtimes after it, each a
// handler of its own that the state records under its base platform; the
// node-installer's applier (PruneCustoms) removes one no longer named.
func TestRuntimeConfigKataOptions(t *testing.T) {
	root := t.TempDir()
	treetest.Write(t, root, "etc/containerd/config.toml", "version = 3\n")
	w, err := hostfs.OpenWritable(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	p, err := platform.Parse("kubeadm-qemu-none")
	if err != nil {
		t.Fatal(err)
	}
	rc := RuntimeConfig{FS: w, Options: configure.Options{Paths: configure.Paths{Prefix: configure.DefaultPrefix}},
		Target: func(platform.Platform) (configure.Target, error) {
			return configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 3, Containerd: "2.1.9"}, nil
		},
		Kata: map[string]configure.KataOptions{p.String(): {HTTPSProxy: "http://p:3128"}},
		Customs: []configure.CustomRuntime{{Name: "kata-big", Platform: p,
			Kata: configure.KataOptions{DropIn: []byte("[hypervisor.qemu]\ndefault_memory = 8192\n")}}},
	}
	res, err := rc.Apply(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"opt/berth/etc/kata/kubeadm-qemu-none.toml", "opt/berth/etc/kata/runtimes/kata-big/config.d/50-overrides.toml", "etc/containerd/conf.d/berth-kata-big.toml"} {
		if !slices.Contains(res.Changed, want) {
			t.Errorf("apply changed %v, not %s", res.Changed, want)
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(root, "opt/berth/etc/kata/kubeadm-qemu-none.toml"))
	big, _ := os.ReadFile(filepath.Join(root, "opt/berth/etc/kata/runtimes/kata-big/kata-big.toml"))
	if !strings.Contains(string(cfg), "agent.https_proxy=http://p:3128") || strings.Contains(string(big), "agent.https_proxy") {
		t.Error("the platform's proxy is not its own")
	}
	st, err := configure.LoadState(w)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CustomHandlersOf(p, ""); !slices.Equal(got, []string{"kata-big"}) {
		t.Errorf("custom handlers of %s: %v", p, got)
	}
	if res, err := rc.Apply(context.Background(), p); err != nil || len(res.Changed) != 0 {
		t.Errorf("second apply: %+v %v", res, err)
	}
	// Without PruneCustoms (berth install), a custom runtime the options
	// no longer name is kept; with it (the node-installer), removed.
	rc.Customs = nil
	if res, err := rc.Apply(context.Background(), p); err != nil || len(res.Changed) != 0 {
		t.Errorf("apply without the custom runtime: %+v %v", res, err)
	}
	rc.PruneCustoms = true
	res, err = rc.Apply(context.Background(), p)
	if err != nil || !slices.Contains(res.Changed, "opt/berth/etc/kata/runtimes/kata-big/config.d/50-overrides.toml") {
		t.Fatalf("pruning apply: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/berth/etc/kata/runtimes")); !os.IsNotExist(err) {
		t.Errorf("the custom runtime's directory is left: %v", err)
	}
	if st, _ := configure.LoadState(w); len(st.CustomHandlersOf(p, "")) != 0 {
		t.Errorf("the state still holds %v", st.CustomHandlersOf(p, ""))
	}
}
