//go:build linux

package configure_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/platform"
)

func queryHandlers(t *testing.T, d critest.Dirs) *cri.Status {
	t.Helper()
	st, err := cri.Query(context.Background(), d.Sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// snapshotTree reads every regular file under dir.
func snapshotTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func assertHandler(t *testing.T, st *cri.Status, p platform.Platform, v int) {
	t.Helper()
	h, ok := st.Handlers[p.Handler()]
	if !ok {
		t.Fatalf("handler %s not registered; containerd %s has %v", p.Handler(), st.RuntimeVersion, st.Names())
	}
	ps := configure.Paths{Prefix: configure.DefaultPrefix}
	if h.RuntimeType != "io.containerd.kata.v2" || h.RuntimePath != ps.Shim(p) {
		t.Errorf("%s: runtime type %q path %q, want io.containerd.kata.v2 %s", p.Handler(), h.RuntimeType, h.RuntimePath, ps.Shim(p))
	}
	if got := h.Options["ConfigPath"]; got != ps.KataConfig(p) {
		t.Errorf("%s: options.ConfigPath = %v, want %s", p.Handler(), got, ps.KataConfig(p))
	}
	if !h.PrivilegedWithoutHostDevices || !slices.Equal(h.PodAnnotations, []string{"io.katacontainers.*"}) {
		t.Errorf("%s: privileged_without_host_devices %v, pod annotations %v", p.Handler(), h.PrivilegedWithoutHostDevices, h.PodAnnotations)
	}
	// containerd 1.6 has no per-handler snapshotter (1.7 added it): its
	// CRI config has no such field to report.
	if v >= 3 && h.Snapshotter != configure.HandlerSnapshotter(p) {
		t.Errorf("%s: snapshotter %q, want %q", p.Handler(), h.Snapshotter, configure.HandlerSnapshotter(p))
	}
	if _, ok := st.Handlers["runc"]; !ok {
		t.Errorf("the node's own runc handler is gone: %v", st.Names())
	}
}

type scenario struct {
	name   string
	layout string
	plats  []string
	// setup writes the node's files before berth runs and returns the
	// main config containerd is started with.
	setup func(t *testing.T, root string, d critest.Dirs, v int) string
	// render turns the applied tree into the config containerd reads
	// (k3s renders its template; others read the files directly).
	render func(t *testing.T, root string, d critest.Dirs, v int) string
}

func writeFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mainConfig(layout string) func(t *testing.T, root string, d critest.Dirs, v int) string {
	return func(_ *testing.T, root string, _ critest.Dirs, _ int) string {
		return filepath.Join(root, platform.Layouts()[layout].Config)
	}
}

// k3sTemplate is what k3s does with config[-v3].toml.tmpl: the "base"
// template expands to the config k3s would have generated.
func k3sRender(t *testing.T, root string, d critest.Dirs, v int) string {
	l := platform.Layouts()["k3s"]
	tmpl := l.Template
	if v >= 3 {
		tmpl = l.TemplateV3
	}
	data, err := os.ReadFile(filepath.Join(root, tmpl))
	if err != nil {
		t.Fatal(err)
	}
	out := strings.Replace(string(data), `{{ template "base" . }}`, critest.BaseConfig(d, v, ""), 1)
	p := filepath.Join(root, l.Config)
	writeFile(t, p, out)
	return p
}

// k0sRender is what k0s does with containerd.d: containerd 2.x merges
// imported plugin sections key by key, so the main config imports the
// directory; containerd 1.x would let an imported CRI section replace the
// node's, so k0s merges the CRI tables of the drop-ins into its own CRI
// config, emulated here by appending them.
func k0sRender(t *testing.T, root string, d critest.Dirs, v int) string {
	l := platform.Layouts()["k0s"]
	p := filepath.Join(root, l.Config)
	if v >= 3 {
		return p
	}
	out := critest.BaseConfig(d, v, "")
	files, _ := filepath.Glob(filepath.Join(root, l.DropInDir, "*.toml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out += "\n" + strings.Replace(string(data), "version = 2\n", "", 1)
	}
	gen := filepath.Join(t.TempDir(), "k0s-containerd.toml")
	writeFile(t, gen, out)
	return gen
}

func scenarios() []scenario {
	return []scenario{
		{name: "kubeadm-no-imports", layout: "kubeadm", plats: []string{"kubeadm-qemu-snp", "kubeadm-qemu-none"},
			setup: func(t *testing.T, root string, d critest.Dirs, v int) string {
				p := filepath.Join(root, "etc/containerd/config.toml")
				writeFile(t, p, critest.BaseConfig(d, v, ""))
				return p
			}, render: mainConfig("kubeadm")},
		{name: "kubeadm-imports", layout: "kubeadm", plats: []string{"kubeadm-clh-none", "kubeadm-qemu-tdx"},
			setup: func(t *testing.T, root string, d critest.Dirs, v int) string {
				p := filepath.Join(root, "etc/containerd/config.toml")
				writeFile(t, p, critest.BaseConfig(d, v, "conf.d/*.toml"))
				writeFile(t, filepath.Join(root, "etc/containerd/conf.d/10-local.toml"), fmt.Sprintf("version = %d\n", v))
				return p
			}, render: mainConfig("kubeadm")},
		{name: "k3s-template", layout: "k3s", plats: []string{"k3s-qemu-snp"},
			setup: func(t *testing.T, root string, d critest.Dirs, v int) string {
				p := filepath.Join(root, platform.Layouts()["k3s"].Config)
				writeFile(t, p, critest.BaseConfig(d, v, ""))
				return p
			}, render: k3sRender},
		{name: "k0s-containerd.d", layout: "k0s", plats: []string{"k0s-fc-none"},
			setup: func(t *testing.T, root string, d critest.Dirs, v int) string {
				// k0s writes a main config importing containerd.d/*.toml by
				// absolute path (containerd 1.6 resolves relative imports
				// against its working directory).
				l := platform.Layouts()["k0s"]
				p := filepath.Join(root, l.Config)
				writeFile(t, p, critest.BaseConfig(d, v, filepath.Join(root, l.DropInDir, "*.toml")))
				return p
			}, render: k0sRender},
	}
}

func TestContainerdIntegration(t *testing.T) {
	for _, tc := range []struct {
		env string
		v   int
	}{{"BERTH_CONTAINERD1", 2}, {"BERTH_CONTAINERD2", 3}} {
		t.Run(tc.env, func(t *testing.T) {
			bin := critest.ContainerdBin(t, tc.env)
			for _, sc := range scenarios() {
				t.Run(sc.name, func(t *testing.T) {
					runScenario(t, bin, tc.v, sc)
				})
			}
		})
	}
}

func runScenario(t *testing.T, bin string, v int, sc scenario) {
	root := t.TempDir()
	d := critest.NewDirs(t)
	main := sc.setup(t, root, d, v)
	before := snapshotTree(t, root)

	fsys, err := hostfs.OpenWritable(root)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	var plats []platform.Platform
	for _, s := range sc.plats {
		p, err := platform.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		plats = append(plats, p)
		target := configure.Target{LayoutName: sc.layout, Layout: platform.Layouts()[sc.layout], ConfigVersion: v}
		rel, _ := filepath.Rel(root, main)
		data, _ := os.ReadFile(main)
		if c, err := runtimecfg.ParseContainerd(rel, data); err == nil {
			target.Imports = c.Imports
		}
		r, err := configure.Render(p, target, configure.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := configure.Apply(fsys, r); err != nil {
			t.Fatalf("apply %s: %v", p, err)
		}
		res, err := configure.Apply(fsys, r)
		if err != nil || len(res.Changed) != 0 {
			t.Fatalf("second apply of %s changed %v (err %v)", p, res, err)
		}
	}
	stop := critest.StartContainerd(t, bin, sc.render(t, root, d, v), d)
	st := queryHandlers(t, d)
	for _, p := range plats {
		assertHandler(t, st, p, v)
	}
	stop()

	// Remove the first platform: the others must stay live.
	if _, err := configure.Remove(fsys, plats[0].Handler()); err != nil {
		t.Fatal(err)
	}
	if len(plats) > 1 {
		stop := critest.StartContainerd(t, bin, sc.render(t, root, d, v), d)
		st = queryHandlers(t, d)
		if _, ok := st.Handlers[plats[0].Handler()]; ok {
			t.Errorf("removed handler %s still registered", plats[0].Handler())
		}
		for _, p := range plats[1:] {
			assertHandler(t, st, p, v)
		}
		stop()
	}
	for _, p := range plats[1:] {
		if _, err := configure.Remove(fsys, p.Handler()); err != nil {
			t.Fatal(err)
		}
	}
	if sc.layout == "k3s" {
		// k3s would regenerate config.toml from its defaults once the
		// template is gone; emulate that.
		writeFile(t, main, critest.BaseConfig(d, v, ""))
	}
	after := snapshotTree(t, root)
	if !maps.Equal(before, after) {
		for k := range maps.Keys(after) {
			if before[k] != after[k] {
				t.Errorf("after remove, %s differs from before:\n--- before\n%s\n--- after\n%s", k, before[k], after[k])
			}
		}
		for k := range maps.Keys(before) {
			if _, ok := after[k]; !ok {
				t.Errorf("after remove, %s is gone", k)
			}
		}
	}
	critest.StartContainerd(t, bin, main, d)
	st = queryHandlers(t, d)
	for _, p := range plats {
		if _, ok := st.Handlers[p.Handler()]; ok {
			t.Errorf("handler %s still registered after remove", p.Handler())
		}
	}
}
