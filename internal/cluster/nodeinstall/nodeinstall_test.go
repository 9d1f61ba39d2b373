//go:build linux

package nodeinstall

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/node/runtimectl/systemdbus"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/internal/testkit/testsystemd"
	"berth.dev/berth/internal/testkit/treetest"
	"berth.dev/berth/platform"
)

func mustPlatforms(t *testing.T, names ...string) []platform.Platform {
	t.Helper()
	var out []platform.Platform
	for _, n := range names {
		p, err := platform.Parse(n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func containerd(t *testing.T, version string) critest.Containerd {
	t.Helper()
	for _, c := range critest.Containerds(t) {
		if c.Version == version {
			return c
		}
	}
	t.Fatalf("no containerd %s in BERTH_CONTAINERDS", version)
	return critest.Containerd{}
}

// node is one test node: a host root copied from a fixture, a real
// containerd running on its config as the node's containerd.service under
// the test supervisor (which speaks systemd's D-Bus API on the root's
// run/systemd/private), and a Node object in the real API server.
type node struct {
	name string
	root string
	dirs critest.Dirs
	sup  *testsystemd.Supervisor
	rel  *testRelease
	// nydus is berth-nydus-snapshotter.service's process.
	nydus critest.Service
	// waitedFor records the holders of the restart Lease an installer
	// on this node waited for.
	waitedFor []string
	// failStarts is how many of the next starts of containerd fail, as a
	// configuration that breaks the runtime would make them.
	failStarts atomic.Int32
	// startupTaints are the installers' Config.StartupTaints.
	startupTaints []*StartupTaint
	// teeKeys is the installers' Config.AdvertiseTEEKeys (with the RBAC
	// on the Node's status that it needs).
	teeKeys bool
}

// leaseName is the restart Lease of a node's tests: one per node, so that
// parallel tests do not wait for each other.
func (n *node) leaseName() string { return "berth-restart-" + n.name }

func newNode(t *testing.T, name, fixture, containerdVersion string) *node {
	t.Helper()
	n := &node{name: name, root: copyFixture(t, fixture), dirs: critest.NewDirs(t), rel: newTestRelease(t)}
	ctr := containerd(t, containerdVersion)
	var dm *critest.Daemon
	// The fixture's socket placeholder is a plain file; systemd's socket
	// takes the place systemd has on a real node.
	sock := filepath.Join(n.root, systemdbus.PrivateSocket)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	nydusState := t.TempDir()
	n.sup = testsystemd.Start(t, sock, testsystemd.Unit{
		Name: "containerd.service",
		Start: func() error {
			if n.failStarts.Load() > 0 {
				n.failStarts.Add(-1)
				return errors.New("containerd failed to start (injected by the test)")
			}
			var err error
			dm, err = critest.StartOnRoot(t, ctr.Bin, n.root, n.dirs)
			return err
		},
		Stop: func() { dm.Stop() },
	}, testsystemd.Unit{
		// berth's nydus-snapshotter, known to systemd once its unit file
		// is there, run as that file says on the node's root.
		Name:     configure.NydusUnit,
		Inactive: true,
		File:     filepath.Join(n.root, configure.SystemdUnitDir, configure.NydusUnit),
		// Its state outside the root: the snapshotter's, not berth's.
		Start: func() error {
			return n.nydus.Start(n.root, filepath.Join(n.root, configure.SystemdUnitDir, configure.NydusUnit),
				"--root", nydusState)
		},
		// As systemd does for the unit's RuntimeDirectory.
		Stop: func() {
			n.nydus.Stop()
			os.RemoveAll(filepath.Join(n.root, "run", configure.NydusProxy))
		},
		Log: n.nydus.Log,
	})
	t.Cleanup(n.nydus.Stop)
	createNode(t, dynClient(t), name, map[string]string{"kubernetes.io/hostname": name})
	return n
}

// installer is a node-installer on n as the DaemonSet's pod runs it: a
// fresh one per run, as a restarted pod is.
func (n *node) installer(t *testing.T, plats []platform.Platform, kataDeploy bool) *Installer {
	t.Helper()
	root, err := hostfs.OpenDir(n.root)
	if err != nil {
		t.Fatal(err)
	}
	sd := systemdbus.Systemd{Socket: filepath.Join(n.root, systemdbus.PrivateSocket)}
	finder := runtimectl.Finder{Units: sd, Ask: func(platform.Layout) runtimectl.Ask { return cri.Ask(n.dirs.Sock) },
		Snapshotter: func(platform.Layout) func(context.Context, string) error {
			return func(ctx context.Context, name string) error {
				return cri.ProveSnapshotter(ctx, n.dirs.Sock, name, 5*time.Second)
			}
		}}
	dyn := clientAs(t, "berth-node-installer-test", installerRules)
	if n.teeKeys {
		dyn = clientAs(t, "berth-node-installer-status-test", installerStatusRules)
	}
	in, err := New(Config{
		NodeName:         n.name,
		Root:             root,
		Writable:         writable(t, n.root),
		Platforms:        plats,
		Install:          configure.Install{Prefix: "/opt/berth"},
		Manifest:         n.rel.Manifest,
		Fetcher:          fetch.New(nil, ""),
		Discover:         discover.Options{Now: time.Now},
		Runtime:          finder.Find,
		KataDeployLabels: kataDeploy,
		StartupTaints:    n.startupTaints,
		AdvertiseTEEKeys: n.teeKeys,
		RestartLease: &RestartLease{Client: dyn, Namespace: "default", Name: n.leaseName(), Holder: n.name,
			Poll: 50 * time.Millisecond, Waiting: func(h string) { n.waitedFor = append(n.waitedFor, h) }},
	}, dyn)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (n *node) handlers(t *testing.T) map[string]cri.Handler {
	t.Helper()
	st, err := cri.Query(context.Background(), n.dirs.Sock, 10*time.Second)
	if err != nil {
		t.Fatalf("containerd does not answer over CRI: %v", err)
	}
	return st.Handlers
}

func readyz(t *testing.T, in *Installer) int {
	t.Helper()
	rec := httptest.NewRecorder()
	in.Health().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return rec.Code
}

// TestInstallAndCleanup runs the node-installer on a TDX Emerald Rapids
// kubeadm node (fixture tdx-emr-kubeadm-ready, containerd 1.7) for two
// platforms: QEMU without TEE is ready, QEMU-SNP is not (an Intel CPU).
// Install puts the first's files under the prefix, applies its handler,
// restarts containerd through the D-Bus API and proves the handler live
// over CRI; it labels both platforms and records an Event for SNP, whose
// files are never written. A second run (a restarted pod) changes nothing
// and restarts nothing. Cleanup restores the host root byte for byte,
// restarts containerd once more (the handler is gone, runc stays) and
// removes the labels, leaving kata-deploy's label where kata-deploy also
// set it.
func TestInstallAndCleanup(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	dyn := dynClient(t)
	n := newNode(t, "ni-tdx", "tdx-emr-kubeadm-ready", "1.7.35")
	// kata-deploy labelled this node before berth: its label must stay.
	if _, err := dyn.Resource(nodesResource).Apply(ctx, n.name, applyLabelsObj(n.name, map[string]string{KataDeployLabel: "true"}), applyAs("kata-deploy")); err != nil {
		t.Fatal(err)
	}
	before := treetest.Content(t, n.root)
	plats := mustPlatforms(t, "kubeadm-qemu-none", "kubeadm-qemu-snp")
	if hs := n.handlers(t); len(hs) == 0 || hs["kata-qemu"].RuntimeType != "" {
		t.Fatalf("containerd before the install: %v", hs)
	}

	// Another node's installer is restarting its runtime: this one must
	// wait for the Lease before its own restart (the Lease lapses after
	// 2 s, as if the other installer died mid-restart).
	other := &RestartLease{Client: dyn, Namespace: "default", Name: n.leaseName(), Holder: "other-node", Duration: 2 * time.Second}
	if held, _, err := other.tryAcquire(ctx, other.Name, 2*time.Second, time.Now); err != nil || !held {
		t.Fatalf("another node taking the restart Lease: %v %v", held, err)
	}

	in := n.installer(t, plats, true)
	if readyz(t, in) != http.StatusServiceUnavailable {
		t.Error("/readyz ok before the run")
	}
	start := time.Now()
	rep, err := in.Run(ctx, ModeInstall)
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	if len(n.waitedFor) != 1 || n.waitedFor[0] != "other-node" {
		t.Errorf("install waited for the restart Lease of %v, want [other-node]", n.waitedFor)
	}
	if h := leaseHolder(t, dyn, "default", n.leaseName()); h != "" {
		t.Errorf("restart Lease still held by %q after the run", h)
	}
	t.Logf("install took %s (restarts %d)", time.Since(start).Round(time.Millisecond), rep.Restarts)
	if !rep.Installed || rep.Restarts != 1 || n.sup.Restarts("containerd.service") != 1 || len(rep.Changed) == 0 {
		t.Errorf("install: installed %v, %d restarts (supervisor %d), changed %v", rep.Installed, rep.Restarts, n.sup.Restarts("containerd.service"), rep.Changed)
	}
	if readyz(t, in) != http.StatusOK {
		t.Error("/readyz not ok after the install")
	}
	hs := n.handlers(t)
	h, ok := hs["kata-qemu"]
	if !ok || h.RuntimeType != "io.containerd.kata.v2" || h.RuntimePath != "/opt/berth/bin/containerd-shim-kata-v2" || h.Options["ConfigPath"] != "/opt/berth/etc/kata/kubeadm-qemu-none.toml" {
		t.Errorf("kata-qemu over CRI: %+v (live: %v)", h, ok)
	}
	if _, ok := hs["runc"]; !ok {
		t.Errorf("runc is gone: %v", hs)
	}
	if _, ok := hs["kata-qemu-snp"]; ok {
		t.Error("the SNP handler is live on a node where SNP is not ready")
	}
	for rel, want := range map[string]string{
		"bin/containerd-shim-kata-v2":                            "containerd-shim-kata-v2",
		"bin/qemu-system-x86_64":                                 "qemu",
		"share/kata-containers/vmlinuz.container":                "kernel",
		"share/defaults/kata-containers/configuration-qemu.toml": "",
	} {
		got, err := os.ReadFile(filepath.Join(n.root, "opt/berth", rel))
		if err != nil || want != "" && string(got) != string(n.rel.Files[want]) {
			t.Errorf("%s not installed from the release: %v", rel, err)
		}
	}
	// The platform that is not ready gets no file.
	for _, rel := range []string{"opt/berth/share/ovmf/AMDSEV.fd", "opt/berth/share/kata-containers/vmlinuz-confidential.container", "opt/berth/etc/kata/kubeadm-qemu-snp.toml"} {
		if _, err := os.Lstat(filepath.Join(n.root, rel)); err == nil {
			t.Errorf("%s written for the SNP platform, which is not ready", rel)
		}
	}
	wantLabels := map[string]string{"berth.dev/installed.kubeadm-qemu-none": "true", "berth.dev/installed.kubeadm-qemu-snp": "no", KataDeployLabel: "true"}
	labels := nodeLabels(t, dyn, n.name)
	for k, v := range wantLabels {
		if labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, labels[k], v, labels)
		}
	}
	if n.rel.ByDigest.Load() == 0 || n.rel.ByDigest.Load() != n.rel.Requests.Load() {
		t.Errorf("the mirror served %d of %d requests by digest; want all", n.rel.ByDigest.Load(), n.rel.Requests.Load())
	}
	// The prefix's parent did not exist on this host: the prefix records
	// that the installer created it, for the cleanup.
	if got, err := os.ReadFile(filepath.Join(n.root, "opt/berth", createdFile)); err != nil || string(got) != "[\"opt\"]\n" {
		t.Errorf("%s = %q, %v; want [\"opt\"]", createdFile, got, err)
	}
	// The one annotation the installer writes: its record, which the
	// agent publishes in the NodeReport.
	if a := nodeAnnotations(t, dyn, n.name); len(a) != 1 {
		t.Errorf("node annotations %v, want only %s", a, v1alpha1.InstallStatusAnnotation)
	}
	rec := installRecord(t, dyn, n.name)
	if rec == nil || rec.Version != "1.0.0" || rec.Digest != n.rel.Manifest.Digest() || rec.Time.IsZero() {
		t.Fatalf("install record %+v, want release 1.0.0 %s", rec, n.rel.Manifest.Digest())
	}
	if st, h, msg := platformState(rec, "kubeadm-qemu-none"); st != v1alpha1.InstallInstalled || h != "kata-qemu" || msg != "" {
		t.Errorf("kubeadm-qemu-none recorded %s (handler %s, error %q), want installed", st, h, msg)
	}
	if st, _, msg := platformState(rec, "kubeadm-qemu-snp"); st != v1alpha1.InstallNotReady || !strings.Contains(msg, "snp.cpu.generation") {
		t.Errorf("kubeadm-qemu-snp recorded %s (%q), want not-ready naming snp.cpu.generation", st, msg)
	}
	if rep.InstallStatus == nil || len(rep.InstallStatus.Platforms) != 2 {
		t.Errorf("the run's report has install status %+v", rep.InstallStatus)
	}
	record := nodeAnnotations(t, dyn, n.name)[v1alpha1.InstallStatusAnnotation]
	evs := nodeEvents(t, dyn, n.name)
	if len(evs[ReasonNotReady]) != 1 {
		t.Fatalf("events: %v", evs)
	}
	ev := evs[ReasonNotReady][0]
	if ev.Type != "Warning" || ev.InvolvedObject.Kind != "Node" || !strings.Contains(ev.Message, "kubeadm-qemu-snp") || !strings.Contains(ev.Message, "snp.cpu.generation") || !strings.Contains(ev.Message, "remedy: ") {
		t.Errorf("not-ready event: %s %s %q", ev.Type, ev.InvolvedObject.Kind, ev.Message)
	}
	installed := treetest.Content(t, n.root)
	served := n.rel.Requests.Load()

	t.Run("second run changes nothing", func(t *testing.T) {
		rep, err := n.installer(t, plats, true).Run(ctx, ModeInstall)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Installed || len(rep.Changed) != 0 || rep.Restarts != 0 || rep.LabelsChanged || n.sup.Restarts("containerd.service") != 1 {
			t.Errorf("second run: installed %v, changed %v, restarts %d, labels changed %v", rep.Installed, rep.Changed, rep.Restarts, rep.LabelsChanged)
		}
		if got := n.rel.Requests.Load(); got != served {
			t.Errorf("second run fetched: %d requests, %d before", got, served)
		}
		if d := diffLines(installed, treetest.Content(t, n.root)); d != "" {
			t.Errorf("second run changed the host:\n%s", d)
		}
		if evs := nodeEvents(t, dyn, n.name)[ReasonNotReady]; len(evs) != 1 || evs[0].Count != 1 {
			t.Errorf("second run events: %+v", evs)
		}
		if !slices.Contains(rep.Handlers["containerd.service"], "kata-qemu") {
			t.Errorf("second run did not verify the handler: %v", rep.Handlers)
		}
		if got := nodeAnnotations(t, dyn, n.name)[v1alpha1.InstallStatusAnnotation]; got != record {
			t.Errorf("second run rewrote the install record (its time must stay the first run's):\n%s\n%s", record, got)
		}
	})

	t.Run("upgrade switches atomically without a restart", func(t *testing.T) {
		// A new manifest digest: the new version is installed beside the
		// old and current switched to it; the runtime configuration names
		// paths through current, so it does not change and containerd is
		// not restarted (running pods keep their shim).
		up := newTestReleaseVersion(t, "1.1.0")
		in := n.installer(t, plats, true)
		in.cfg.Manifest = up.Manifest
		rep, err := in.Run(ctx, ModeInstall)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Installed || len(rep.Changed) != 0 || rep.Restarts != 0 || n.sup.Restarts("containerd.service") != 1 {
			t.Errorf("upgrade: installed %v, changed %v, restarts %d", rep.Installed, rep.Changed, rep.Restarts)
		}
		got, err := os.ReadFile(filepath.Join(n.root, "opt/berth/bin/containerd-shim-kata-v2"))
		if err != nil || string(got) != string(up.Files["containerd-shim-kata-v2"]) {
			t.Errorf("the shim is not the new release's: %v", err)
		}
		if _, err := os.Readlink(filepath.Join(n.root, "opt/berth/previous")); err != nil {
			t.Errorf("the previous installation is not kept for rollback: %v", err)
		}
		if _, ok := n.handlers(t)["kata-qemu"]; !ok {
			t.Error("kata-qemu not live after the upgrade")
		}
		if rec := installRecord(t, dyn, n.name); rec == nil || rec.Version != "1.1.0" || rec.Digest != up.Manifest.Digest() {
			t.Errorf("install record after the upgrade: %+v", rec)
		}
	})

	t.Run("cleanup restores the node", func(t *testing.T) {
		in := n.installer(t, plats, true)
		rep, err := in.Run(ctx, ModeCleanup)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Restarts != 1 || n.sup.Restarts("containerd.service") != 2 || len(rep.Removed) == 0 || len(rep.Kept) != 0 {
			t.Errorf("cleanup: %d restarts, removed %v, kept %v", rep.Restarts, rep.Removed, rep.Kept)
		}
		if readyz(t, in) != http.StatusOK {
			t.Error("/readyz not ok after cleanup")
		}
		if d := diffLines(before, treetest.Content(t, n.root)); d != "" {
			t.Errorf("cleanup left the host root different from before the install:\n%s", d)
		}
		hs := n.handlers(t)
		if _, ok := hs["kata-qemu"]; ok {
			t.Error("kata-qemu still live after cleanup")
		}
		if _, ok := hs["runc"]; !ok {
			t.Errorf("runc is gone after cleanup: %v", hs)
		}
		labels := nodeLabels(t, dyn, n.name)
		for k := range labels {
			if strings.HasPrefix(k, InstalledLabelPrefix) {
				t.Errorf("label %s left after cleanup", k)
			}
		}
		if labels[KataDeployLabel] != "true" {
			t.Errorf("kata-deploy's own label was removed: %v", labels)
		}
		if a := nodeAnnotations(t, dyn, n.name); len(a) != 0 {
			t.Errorf("cleanup left annotations: %v", a)
		}
		if !slices.Contains(rep.Removed, "/opt") {
			t.Errorf("cleanup did not remove /opt, which the install created: %v", rep.Removed)
		}
		rep, err = n.installer(t, plats, true).Run(ctx, ModeCleanup)
		if err != nil || rep.Restarts != 0 || len(rep.Removed) != 0 || rep.LabelsChanged {
			t.Errorf("second cleanup: %+v, %v", rep, err)
		}
	})
}

// TestNotReadyNodeGetsNothing: on a cloud VM without nested
// virtualisation (no /dev/kvm), the platform is not ready: the host root
// is left exactly as it was (not one file written, not one mtime touched),
// the runtime is never asked for, and the node gets the "no" label and an
// Event naming the first failing check and its remedy.
func TestNotReadyNodeGetsNothing(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	dyn := dynClient(t)
	root := copyFixture(t, "cloud-vm-no-nested")
	createNode(t, dyn, "ni-cloud", nil)
	before := treetestListing(t, root)
	hostRoot, err := hostfs.OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	rel := newTestRelease(t)
	in, err := New(Config{
		NodeName: "ni-cloud", Root: hostRoot, Writable: writable(t, root), Install: configure.Install{Prefix: "/opt/berth"},
		Platforms: mustPlatforms(t, "kubeadm-qemu-none"),
		Manifest:  rel.Manifest, Fetcher: fetch.New(nil, ""),
		Discover: discover.Options{Now: time.Now},
		Runtime: func(context.Context, platform.Layout) (configure.Runtime, error) {
			t.Error("the runtime was looked for on a node where nothing is installed")
			return nil, os.ErrNotExist
		},
	}, clientAs(t, "berth-node-installer-test", installerRules))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := in.Run(ctx, ModeInstall)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Platforms) != 1 || rep.Platforms[0].Status != StatusNotReady || rep.Platforms[0].Blocker != "virt.hardware" {
		t.Errorf("report: %+v", rep.Platforms)
	}
	if after := treetestListing(t, root); after != before {
		t.Errorf("the host root changed:\n%s", diffLines(before, after))
	}
	if rel.Requests.Load() != 0 {
		t.Errorf("%d downloads for a node that is not ready", rel.Requests.Load())
	}
	if got := nodeLabels(t, dyn, "ni-cloud")["berth.dev/installed.kubeadm-qemu-none"]; got != "no" {
		t.Errorf("label = %q, want no", got)
	}
	if st, _, msg := platformState(installRecord(t, dyn, "ni-cloud"), "kubeadm-qemu-none"); st != v1alpha1.InstallNotReady || !strings.HasPrefix(msg, "virt.hardware: ") {
		t.Errorf("recorded %s (%q), want not-ready with virt.hardware", st, msg)
	}
	evs := nodeEvents(t, dyn, "ni-cloud")[ReasonNotReady]
	if len(evs) != 1 || !strings.Contains(evs[0].Message, "virt.hardware") || !strings.Contains(evs[0].Message, "remedy: ") {
		t.Errorf("events: %+v", evs)
	}
	if readyz(t, in) != http.StatusOK {
		t.Error("/readyz not ok: a node where nothing is ready is done too")
	}
}

// TestNoRuntimeNoInstall: on a node where the platform is ready but
// systemd runs no containerd.service (the runtime is some other unit, or
// stopped), nothing is downloaded or written: the installer fails before
// the install, records BerthInstallFailed on the Node and stays unready,
// so the DaemonSet's rollout stops at this node.
func TestNoRuntimeNoInstall(t *testing.T) {
	testenv.Need(t)
	ctx := context.Background()
	dyn := dynClient(t)
	n := &node{name: "ni-noruntime", root: copyFixture(t, "tdx-emr-kubeadm-ready"), dirs: critest.NewDirs(t), rel: newTestRelease(t)}
	sock := filepath.Join(n.root, systemdbus.PrivateSocket)
	if err := os.MkdirAll(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	n.sup = testsystemd.Start(t, sock, testsystemd.Unit{Name: "docker.service", Start: func() error { return nil }, Stop: func() {}})
	createNode(t, dyn, n.name, nil)
	before := treetestListing(t, n.root)

	in := n.installer(t, mustPlatforms(t, "kubeadm-qemu-none"), false)
	_, err := in.Run(ctx, ModeInstall)
	if err == nil || !strings.Contains(err.Error(), "containerd.service") {
		t.Fatalf("install without a running containerd: %v", err)
	}
	if readyz(t, in) != http.StatusServiceUnavailable {
		t.Error("/readyz ok after a failed install")
	}
	if after := treetestListing(t, n.root); after != before {
		t.Errorf("the host root changed:\n%s", diffLines(before, after))
	}
	if got := n.rel.Requests.Load(); got != 0 {
		t.Errorf("%d downloads before the runtime was found", got)
	}
	if evs := nodeEvents(t, dyn, n.name)[ReasonInstallFailed]; len(evs) != 1 || !strings.Contains(evs[0].Message, "kubeadm-qemu-none") {
		t.Errorf("events: %+v", evs)
	}
	// The failed platform's record carries the error, for the NodeReport
	// and berth fleet.
	if st, h, msg := platformState(installRecord(t, dyn, n.name), "kubeadm-qemu-none"); st != v1alpha1.InstallFailed || h != "kata-qemu" || !strings.Contains(msg, "containerd.service") {
		t.Errorf("recorded %s (handler %s, %q), want failed naming containerd.service", st, h, msg)
	}
	if n.sup.Restarts("docker.service") != 0 {
		t.Error("another unit was restarted")
	}
}

// writable opens dir as the host root for writing, closed with the test.
func writable(t *testing.T, dir string) *hostfs.Writable {
	t.Helper()
	w, err := hostfs.OpenWritable(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}
