package configure

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/platform"
)

// TestNydusSharedAndRemoved applies two nydus platforms side by side: the
// nydus config, unit and proxy drop-in are written once and kept until the
// last of them is removed, which leaves the root as it was.
func TestNydusSharedAndRemoved(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "etc/containerd/config.toml", "version = 3\n")
	before := contents(readTree(t, dir))
	fsys := openRoot(t, dir)
	p, q := render(t, "kubeadm-qemu-snp", "kubeadm", 3), render(t, "kubeadm-qemu-tdx", "kubeadm", 3)
	for _, r := range []*Rendered{p, q} {
		if _, err := Apply(fsys, r); err != nil {
			t.Fatal(err)
		}
	}
	shared := []string{"opt/berth/etc/nydus/berth-nydus.toml", "etc/systemd/system/" + NydusUnit, "etc/containerd/conf.d/berth-nydus.toml"}
	for _, h := range []string{p.Handler, q.Handler} {
		got := contents(readTree(t, dir))
		for _, f := range shared {
			if _, ok := got[f]; !ok {
				t.Fatalf("%s missing before removing %s", f, h)
			}
		}
		if !strings.Contains(got["etc/containerd/conf.d/berth-"+q.Handler+".toml"]+got["etc/containerd/conf.d/berth-"+p.Handler+".toml"], `snapshotter = "berth-nydus"`) {
			t.Errorf("handler does not name berth's proxy snapshotter")
		}
		if _, err := Remove(fsys, h); err != nil {
			t.Fatal(err)
		}
	}
	after := contents(readTree(t, dir))
	delete(after, StatePath)
	delete(after, "var/lib/berth/config.lock")
	for k := range after {
		if strings.HasPrefix(k, "var/lib/berth/") {
			delete(after, k)
		}
	}
	if !maps.Equal(after, before) {
		t.Errorf("after removing both: %v, want %v", after, before)
	}
}

// TestNydusRefusesForeignProxy refuses a proxy plugin of berth's name or
// address that berth did not write, in the main config or a drop-in next
// to berth's, and changes nothing.
func TestNydusRefusesForeignProxy(t *testing.T) {
	cases := map[string][2]string{
		"same name in main config": {"etc/containerd/config.toml",
			"version = 3\n[proxy_plugins.berth-nydus]\ntype = \"snapshot\"\naddress = \"/run/other.sock\"\n"},
		"same address in a drop-in": {"etc/containerd/conf.d/kata-deploy.toml",
			"version = 3\n[proxy_plugins.nydus-for-kata-tee]\ntype = \"snapshot\"\naddress = \"" + NydusSocket + "\"\n"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			put(t, dir, "etc/containerd/config.toml", "version = 3\nimports = [\"conf.d/*.toml\"]\n")
			put(t, dir, c[0], c[1])
			before := readTree(t, dir)
			_, err := Apply(openRoot(t, dir), render(t, "kubeadm-qemu-snp", "kubeadm", 3))
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "proxy plugin") {
				t.Fatalf("apply: %v, want a refusal naming the proxy plugin", err)
			}
			t.Log(err)
			after := contents(readTree(t, dir))
			for k := range after {
				if strings.HasPrefix(k, "var/lib/berth/") {
					delete(after, k) // the lock file
				}
			}
			if !maps.Equal(after, contents(before)) {
				t.Errorf("refused apply changed files: %v", after)
			}
		})
	}
}

// TestNydusProxyInBlock puts the proxy plugin in its own shared block of
// a main config (containerd 1.x) and refuses a foreign entry outside
// berth's blocks there.
func TestNydusProxyInBlock(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "etc/containerd/config.toml", v2Main)
	fsys := openRoot(t, dir)
	if _, err := Apply(fsys, render(t, "kubeadm-qemu-snp", "kubeadm", 2)); err != nil {
		t.Fatal(err)
	}
	main := contents(readTree(t, dir))["etc/containerd/config.toml"]
	if strings.Count(main, "[proxy_plugins.berth-nydus]") != 1 {
		t.Fatalf("main config:\n%s", main)
	}
	// A second apply reads berth's own block and does not refuse it.
	if _, err := Apply(fsys, render(t, "kubeadm-qemu-snp", "kubeadm", 2)); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	if _, err := Remove(fsys, "kata-qemu-snp"); err != nil {
		t.Fatal(err)
	}
	if got := contents(readTree(t, dir))["etc/containerd/config.toml"]; got != v2Main {
		t.Errorf("after remove:\n%s", got)
	}
}

// TestErofsNeedsContainerd21 refuses erofs for a containerd that has no
// erofs snapshotter.
func TestErofsNeedsContainerd21(t *testing.T) {
	p := mustParse(t, "kubeadm-qemu-none+erofs")
	for _, c := range []struct {
		ver string
		v   int
		ok  bool
	}{{"1.7.35", 2, false}, {"2.0.7", 3, false}, {"2.1.9", 3, true}, {"2.4.2", 4, true}} {
		tg := targetFor(t, "kubeadm", c.v)
		tg.Containerd = c.ver
		_, err := Render(p, tg, Options{})
		if c.ok != (err == nil) {
			t.Errorf("containerd %s: %v", c.ver, err)
		}
		if err != nil && !strings.Contains(err.Error(), "containerd 2.1") {
			t.Errorf("containerd %s: unclear error %v", c.ver, err)
		}
	}
}

// TestNydusProxyNameInPlatformTable holds the check's name of berth's
// proxy plugin equal to the one configure writes.
func TestNydusProxyNameInPlatformTable(t *testing.T) {
	if got := platform.Nydus.Setup().Proxy; got != NydusProxy {
		t.Errorf("platform table: proxy %q, configure writes %q", got, NydusProxy)
	}
}

// TestErofsWritesNoDiffService: an erofs platform's files on containerd
// 2.1+ are its handler's (naming the erofs snapshotter) and the imports
// line, and nothing configures the diff service (see erofs in
// snapshotter.go: a differ list naming erofs breaks CRI where the differ
// does not load).
func TestErofsWritesNoDiffService(t *testing.T) {
	tg := targetFor(t, "kubeadm", 3)
	tg.Containerd = "2.4.2"
	r, err := Render(mustParse(t, "kubeadm-qemu-none+erofs"), tg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	named := false
	for _, f := range r.Host {
		if strings.Contains(string(f.Content), "diff-service") {
			t.Errorf("%s configures the diff service:\n%s", f.Path, f.Content)
		}
		named = named || strings.Contains(string(f.Content), `snapshotter = "erofs"`)
	}
	if !named {
		t.Error("no file names the erofs snapshotter for the handler")
	}
}

// TestNydusNames holds every name of berth's nydus-snapshotter to the one
// function a suffix would change, and the unit among a platform's files
// to what a live apply starts.
func TestNydusNames(t *testing.T) {
	n := NydusNamesFor(Paths{Prefix: "/opt/b"})
	want := NydusNames{Proxy: "berth-nydus", Socket: "/run/berth-nydus/containerd-nydus-grpc.sock",
		Unit: "berth-nydus-snapshotter.service", UnitPath: "etc/systemd/system/berth-nydus-snapshotter.service",
		Binary: "/opt/b/bin/containerd-nydus-grpc", Config: "/opt/b/etc/nydus/berth-nydus.toml", Root: "/var/lib/berth-nydus"}
	if n != want {
		t.Errorf("NydusNamesFor = %+v, want %+v", n, want)
	}
	if d := NydusNamesFor(Paths{}); d.Binary != DefaultPrefix+"/"+NydusBinary {
		t.Errorf("default prefix: binary %s", d.Binary)
	}
	r, err := Render(mustParse(t, "kubeadm-qemu-snp"), targetFor(t, "kubeadm", 3), Options{Paths: Paths{Prefix: "/opt/b"}})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range r.Host {
		paths = append(paths, f.Path)
		if f.Path == n.UnitPath && !strings.Contains(string(f.Content), "ExecStart="+n.Binary+" --config "+n.Config+" --address "+n.Socket) {
			t.Errorf("unit does not run %s with %s on %s:\n%s", n.Binary, n.Config, n.Socket, f.Content)
		}
	}
	if got := ServiceUnits(paths); !slices.Equal(got, []string{n.Unit}) {
		t.Errorf("ServiceUnits(%v) = %v, want [%s]", paths, got, n.Unit)
	}
	if got := ServiceUnits([]string{"etc/containerd/conf.d/x.toml", "lib/systemd/system/containerd.service"}); got != nil {
		t.Errorf("ServiceUnits of files berth does not run = %v", got)
	}
	if !NeedsNydus(mustParse(t, "kubeadm-qemu-snp")) || NeedsNydus(mustParse(t, "kubeadm-qemu-none")) || NeedsNydus(mustParse(t, "openshift-qemu-snp")) {
		t.Errorf("NeedsNydus: kubeadm snp %v, kubeadm none %v, openshift snp %v; want true false false",
			NeedsNydus(mustParse(t, "kubeadm-qemu-snp")), NeedsNydus(mustParse(t, "kubeadm-qemu-none")), NeedsNydus(mustParse(t, "openshift-qemu-snp")))
	}
}
