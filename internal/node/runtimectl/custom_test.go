package runtimectl_test

import (
	"berth.dev/berth/internal/testkit/treetest"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/platform"
)

// TestRemovePlatformsTakesCustomRuntimes: uninstall's first step
// (RemovePlatforms) removes the custom runtimes made from a platform with
// it, and leaves the tree as it was before either was applied.
func TestRemovePlatformsTakesCustomRuntimes(t *testing.T) {
	root := t.TempDir()
	main := filepath.Join(root, "etc/containerd/config.toml")
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
	target := configure.Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 3, Containerd: "2.1.9"}
	for _, custom := range []string{"", "kata-big"} {
		o := configure.Options{Paths: configure.Paths{Custom: custom}}
		if custom != "" {
			o.Kata.DropIn = []byte("[hypervisor.qemu]\ndefault_memory = 8192\n")
		}
		r, err := configure.Render(p, target, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := configure.Apply(w, r); err != nil {
			t.Fatal(err)
		}
	}
	st, err := configure.LoadState(w)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ch := runtimectl.Change{FS: w, Out: &out, Err: &out}
	if err := ch.RemovePlatforms(context.Background(), st, []string{p.String()}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var left []string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, path)
		}
		return nil
	})
	if len(left) != 1 || left[0] != main {
		t.Errorf("left after removing %s: %v\n%s", p, left, out.String())
	}
}
