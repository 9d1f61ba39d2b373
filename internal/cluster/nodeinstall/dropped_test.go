//go:build linux

package nodeinstall

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/internal/testkit/treetest"
)

// TestDroppedPlatformIsRemoved is issue #31's upgrade correctness on a TDX
// kubeadm node with a real containerd 1.7: the list [none,
// tdx] installs both, then [none] alone removes TDX's handler (gone over
// CRI after one verified restart), its runtime configuration, its
// installed label and its files (the confidential kernel, which only TDX
// needs, and the previous installation that still served it), while the
// shim, QEMU and the configs QEMU-none shares stay and kata-qemu stays
// live. Records berth cannot read stop the run before anything is
// removed. A list whose one platform is not ready, after dropping the
// last installed one, leaves nothing under the prefix.
func TestDroppedPlatformIsRemoved(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	dyn := dynClient(t)
	n := newNode(t, "ni-drop", "tdx-emr-kubeadm-ready", "1.7.35")
	before := treetest.Content(t, n.root)
	fixtureNames := namingTDX(t, n.root)
	both := mustPlatforms(t, "kubeadm-qemu-none", "kubeadm-qemu-tdx")
	rep, err := n.installer(t, both, true).Run(ctx, ModeInstall)
	if err != nil {
		t.Fatalf("install of both: %v", err)
	}
	for _, r := range rep.Platforms {
		if r.Status != StatusInstalled {
			t.Fatalf("%s is %s on the TDX fixture (%s: %s); the test needs both installed", r.Platform, r.Status, r.Blocker, r.Message)
		}
	}
	hs := n.handlers(t)
	if _, ok := hs["kata-qemu-tdx"]; !ok {
		t.Fatalf("kata-qemu-tdx not live after installing both: %v", hs)
	}
	confKernel := "share/kata-containers/vmlinuz-confidential.container"
	if _, err := os.Stat(filepath.Join(n.root, "opt/berth", confKernel)); err != nil {
		t.Fatalf("TDX's kernel not installed: %v", err)
	}
	restarts := n.sup.Restarts("containerd.service")

	t.Run("unreadable records remove nothing", func(t *testing.T) {
		statePath := filepath.Join(n.root, configure.StatePath)
		good, err := os.ReadFile(statePath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.WriteFile(statePath, good, 0o644); err != nil {
				t.Fatal(err)
			}
		})
		if err := os.WriteFile(statePath, []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
		listing := treetest.Content(t, n.root)
		_, err = n.installer(t, mustPlatforms(t, "kubeadm-qemu-none"), true).Run(ctx, ModeInstall)
		if err == nil || !strings.Contains(err.Error(), "removing nothing") {
			t.Errorf("a run with an unreadable state: %v, want an error saying nothing is removed", err)
		}
		if d := diffLines(listing, treetest.Content(t, n.root)); d != "" {
			t.Errorf("a run with an unreadable state changed the host:\n%s", d)
		}
		if _, ok := n.handlers(t)["kata-qemu-tdx"]; !ok || n.sup.Restarts("containerd.service") != restarts {
			t.Error("a run with an unreadable state removed the TDX handler or restarted containerd")
		}
	})

	one := mustPlatforms(t, "kubeadm-qemu-none")
	t.Run("a removal that breaks the runtime rolls back", func(t *testing.T) {
		content := treetest.Content(t, n.root)
		restarts := n.sup.Restarts("containerd.service")
		n.failStarts.Store(1)
		_, err := n.installer(t, one, true).Run(ctx, ModeInstall)
		if !errors.Is(err, configure.ErrRefused) || !strings.Contains(err.Error(), "put the previous files back") {
			t.Errorf("a removal whose restart fails: %v, want it refused and rolled back", err)
		}
		if got := n.sup.Restarts("containerd.service"); got != restarts+2 {
			t.Errorf("%d restarts, want 2 (the removal's, the rollback's)", got-restarts)
		}
		if d := diffLines(content, treetest.Content(t, n.root)); d != "" {
			t.Errorf("the rolled-back removal changed the host:\n%s", d)
		}
		if _, ok := n.handlers(t)["kata-qemu-tdx"]; !ok {
			t.Error("kata-qemu-tdx not live again after the rollback")
		}
		if l := nodeLabels(t, dyn, n.name); l["berth.dev/installed.kubeadm-qemu-tdx"] != "true" {
			t.Errorf("labels after a failed removal: %v", l)
		}
		if evs := nodeEvents(t, dyn, n.name)[ReasonInstallFailed]; len(evs) != 1 || !strings.Contains(evs[0].Message, "kubeadm-qemu-tdx") {
			t.Errorf("events after a failed removal: %+v", evs)
		}
	})
	restarts = n.sup.Restarts("containerd.service")
	rep, err = n.installer(t, one, true).Run(ctx, ModeInstall)
	if err != nil {
		t.Fatalf("install of none alone: %v", err)
	}
	if rep.Restarts != 1 || n.sup.Restarts("containerd.service") != restarts+1 {
		t.Errorf("dropping TDX: %d restarts (supervisor %d after %d), want one", rep.Restarts, n.sup.Restarts("containerd.service"), restarts)
	}
	if !slices.ContainsFunc(rep.Platforms, func(r PlatformResult) bool {
		return r.Platform == "kubeadm-qemu-tdx" && r.Status == StatusRemoved
	}) {
		t.Errorf("the report does not say TDX was removed: %+v", rep.Platforms)
	}
	hs = n.handlers(t)
	for h, want := range map[string]bool{"kata-qemu-tdx": false, "kata-qemu": true, "runc": true} {
		if _, ok := hs[h]; ok != want {
			t.Errorf("handler %s live over CRI: %v, want %v (%v)", h, ok, want, hs)
		}
	}
	labels := nodeLabels(t, dyn, n.name)
	if _, ok := labels["berth.dev/installed.kubeadm-qemu-tdx"]; ok || labels["berth.dev/installed.kubeadm-qemu-none"] != "true" || labels[KataDeployLabel] != "true" {
		t.Errorf("labels after dropping TDX: %v", labels)
	}
	w, err := hostfs.OpenWritable(n.root)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	st, err := configure.LoadState(w)
	if err != nil || !slices.Equal(st.Handlers(), []string{"kata-qemu"}) {
		t.Errorf("config state handlers %v (%v), want [kata-qemu]", st.Handlers(), err)
	}
	// Nothing of TDX left on the host: no file is named for it or holds
	// its kernel, under the prefix (every installation), and no file but
	// the fixture's own names its handler.
	filepath.WalkDir(n.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(n.root, p)
		if strings.Contains(rel, "vmlinuz-confidential") || strings.Contains(rel, "qemu-tdx") {
			t.Errorf("%s left after dropping TDX", rel)
		}
		return nil
	})
	if got := namingTDX(t, n.root); !slices.Equal(got, fixtureNames) {
		t.Errorf("files naming kata-qemu-tdx after dropping TDX: %v, before the install: %v", got, fixtureNames)
	}
	if _, err := os.Lstat(filepath.Join(n.root, "opt/berth/previous")); err == nil {
		t.Error("the previous installation, which serves TDX, is kept")
	}
	for rel, want := range map[string]string{
		"bin/containerd-shim-kata-v2":             "containerd-shim-kata-v2",
		"bin/qemu-system-x86_64":                  "qemu",
		"share/kata-containers/vmlinuz.container": "kernel",
	} {
		got, err := os.ReadFile(filepath.Join(n.root, "opt/berth", rel))
		if err != nil || string(got) != string(n.rel.Files[want]) {
			t.Errorf("shared %s not kept: %v", rel, err)
		}
	}
	var rec struct{ Platforms []string }
	if cur, err := os.Readlink(filepath.Join(n.root, "opt/berth/current")); err != nil {
		t.Error(err)
	} else if b, err := os.ReadFile(filepath.Join(n.root, "opt/berth", cur, ".berth/install.json")); err != nil || json.Unmarshal(b, &rec) != nil || !slices.Equal(rec.Platforms, []string{"kubeadm-qemu-none"}) {
		t.Errorf("current installation serves %v (%v), want [kubeadm-qemu-none]", rec.Platforms, err)
	}
	installed := treetest.Content(t, n.root)

	t.Run("rerun changes nothing", func(t *testing.T) {
		rep, err := n.installer(t, one, true).Run(ctx, ModeInstall)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Installed || len(rep.Changed) != 0 || rep.Restarts != 0 || rep.LabelsChanged || len(rep.Removed) != 0 {
			t.Errorf("rerun: installed %v, changed %v, restarts %d, labels changed %v, removed %v", rep.Installed, rep.Changed, rep.Restarts, rep.LabelsChanged, rep.Removed)
		}
		if d := diffLines(installed, treetest.Content(t, n.root)); d != "" {
			t.Errorf("rerun changed the host:\n%s", d)
		}
	})

	t.Run("dropping the last installed platform", func(t *testing.T) {
		// SNP is not ready on an Intel node: nothing is installed for it,
		// and QEMU-none, dropped, leaves nothing behind.
		rep, err := n.installer(t, mustPlatforms(t, "kubeadm-qemu-snp"), true).Run(ctx, ModeInstall)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Restarts != 1 {
			t.Errorf("%d restarts, want one", rep.Restarts)
		}
		hs := n.handlers(t)
		if _, ok := hs["kata-qemu"]; ok {
			t.Errorf("kata-qemu still live: %v", hs)
		}
		labels := nodeLabels(t, dyn, n.name)
		if _, ok := labels["berth.dev/installed.kubeadm-qemu-none"]; ok || labels["berth.dev/installed.kubeadm-qemu-snp"] != "no" {
			t.Errorf("labels: %v", labels)
		}
		if _, ok := labels[KataDeployLabel]; ok {
			t.Errorf("kata-deploy's label stays on a node with no platform installed: %v", labels)
		}
		if _, err := os.Lstat(filepath.Join(n.root, "opt/berth/current")); err == nil {
			t.Error("an installation is left under the prefix")
		}
		if _, err := n.installer(t, one, true).Run(ctx, ModeCleanup); err != nil {
			t.Fatal(err)
		}
		if d := diffLines(before, treetest.Content(t, n.root)); d != "" {
			t.Errorf("cleanup after dropping everything left the host different from before:\n%s", d)
		}
	})
}

// namingTDX lists the regular files under root that name the TDX handler
// (berth's backups aside: they hold the originals).
func namingTDX(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if strings.HasPrefix(rel, "var/lib/berth/backups/") {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), "kata-qemu-tdx") {
			out = append(out, rel)
		}
		return nil
	})
	return out
}
