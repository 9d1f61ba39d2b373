//go:build linux

package configure_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

// TestConcurrentApplyRemove runs 50 `berth config apply` / `berth config
// remove` pairs at once on one root, as real processes, on the config
// containerd 2.1 writes (`imports = []`, which every apply extends), plus
// 25 applies of platforms that stay. Then the config, the state file and a
// real containerd 2.1 must agree on exactly the platforms that stay, and
// removing them gives back the original file byte for byte, with no
// directory left behind.
func TestConcurrentApplyRemove(t *testing.T) {
	ctr := containerdVersion(t, "2.1.9")
	orig, err := os.ReadFile(upstreamtest.Path(t, "runtime-configs", "containerd-2.1.9-config-default.toml"))
	if err != nil {
		t.Fatal(err)
	}
	berth := filepath.Join(t.TempDir(), "berth")
	if out, err := exec.Command("go", "build", "-o", berth, "berth.dev/berth/cmd/berth").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := t.TempDir()
	main := filepath.Join(root, "etc/containerd/config.toml")
	writeFile(t, main, string(orig))

	run := func(args ...string) error {
		var out bytes.Buffer
		c := exec.Command(berth, append([]string{"--root", root}, args...)...)
		c.Stdout, c.Stderr = &out, &out
		c.Env = []string{"PATH=/usr/bin:/bin", "NO_COLOR=1"}
		if err := c.Run(); err != nil {
			return fmt.Errorf("berth %v: %v\n%s", args, err, out.String())
		}
		return nil
	}
	apply := func(p string) error {
		return run("config", "apply", "-p", p, "--force", "--containerd-config-version", "3")
	}
	churn := []string{"kubeadm-qemu-none", "kubeadm-qemu-snp", "kubeadm-qemu-tdx", "kubeadm-firecracker-none", "kubeadm-qemu-none+gpu"}
	keep := []string{"kubeadm-cloud-hypervisor-none", "kubeadm-qemu-snp+gpu", "kubeadm-qemu-tdx+gpu", "kubeadm-qemu-none+nydus", "kubeadm-qemu-snp+rust"}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 50 {
		wg.Go(func() {
			p := churn[i%len(churn)]
			if err := apply(p); err != nil {
				errs <- err
				return
			}
			if err := run("config", "remove", "-p", p); err != nil {
				errs <- err
			}
		})
	}
	for i := range 25 {
		wg.Go(func() {
			if err := apply(keep[i%len(keep)]); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}

	// The churn pairs ran apply then remove each, in any interleaving with
	// the others: exactly the kept platforms are left.
	var handlers []string
	for _, s := range keep {
		handlers = append(handlers, mustPlatform(t, s).Handler())
	}
	slices.Sort(handlers)
	data, err := os.ReadFile(filepath.Join(root, configure.StatePath))
	if err != nil {
		t.Fatal(err)
	}
	var st configure.State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Handlers(); !slices.Equal(got, handlers) {
		t.Errorf("state file has %v, want %v", got, handlers)
	}
	drops, _ := filepath.Glob(filepath.Join(root, "etc/containerd/conf.d/*"))
	// The nydus proxy plugin's drop-in is shared by the nydus platforms.
	drops = slices.DeleteFunc(drops, func(s string) bool { return filepath.Base(s) == configure.NydusProxy+".toml" })
	if len(drops) != len(handlers) {
		t.Errorf("drop-ins %v, want one for each of %v", drops, handlers)
	}
	for _, h := range handlers {
		if _, err := os.Stat(filepath.Join(root, "etc/containerd/conf.d/berth-"+h+".toml")); err != nil {
			t.Errorf("drop-in of %s: %v", h, err)
		}
	}
	dm, err := critest.StartOnRoot(t, ctr.Bin, root, critest.NewDirs(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dm.Status.Names(), append(slices.Clone(handlers), "runc"); !sameSet(got, want) {
		t.Errorf("containerd %s has %v, want %v", ctr.Version, got, want)
	}
	dm.Stop()

	if err := run("config", "remove", "--all"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(main); !bytes.Equal(got, orig) {
		t.Errorf("config not restored byte for byte:\n%s", got)
	}
	var left []string
	filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		if rel, _ := filepath.Rel(root, p); err == nil && rel != "." && rel != "etc" && rel != "etc/containerd" && rel != "etc/containerd/config.toml" {
			left = append(left, rel)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("left behind after remove --all: %v", left)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func mustPlatform(t *testing.T, s string) platform.Platform {
	t.Helper()
	p, err := platform.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
