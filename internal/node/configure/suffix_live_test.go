//go:build linux

package configure_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/platform"
)

// TestSuffixesSideBySide applies one platform three times on a real
// containerd, unsuffixed and with suffixes a and b (two releases side by
// side for an A/B upgrade): containerd lists the three handlers, each
// pointing into its own prefix; removing a leaves the unsuffixed install
// and b live and their files byte for byte; removing the rest gives the
// node back as it was.
func TestSuffixesSideBySide(t *testing.T) {
	bin := critest.ContainerdBin(t, "BERTH_CONTAINERD2")
	for _, sc := range scenarios() {
		if sc.name != "kubeadm-no-imports" && sc.name != "k3s-template" {
			continue // a drop-in layout and a shared-file (block) layout
		}
		t.Run(sc.name, func(t *testing.T) {
			const v = 3
			root := t.TempDir()
			d := critest.NewDirs(t)
			main := sc.setup(t, root, d, v)
			before := snapshotTree(t, root)
			fsys, err := hostfs.OpenWritable(root)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			p, err := platform.Parse(sc.plats[0])
			if err != nil {
				t.Fatal(err)
			}
			suffixes := []configure.Suffix{"", "a", "b"}
			files := map[configure.Suffix][]string{}
			for _, s := range suffixes {
				target := configure.Target{LayoutName: sc.layout, Layout: platform.Layouts()[sc.layout], ConfigVersion: v}
				rel, _ := filepath.Rel(root, main)
				data, _ := os.ReadFile(main)
				if c, err := runtimecfg.ParseContainerd(rel, data); err == nil {
					target.Imports = c.Imports
				}
				r, err := configure.Render(p, target, configure.Options{Paths: configure.Paths{Suffix: s}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := configure.Apply(fsys, r); err != nil {
					t.Fatalf("apply %s suffix %q: %v", p, s, err)
				}
				for _, f := range r.Host {
					if f.Kind == configure.Owned {
						files[s] = append(files[s], f.Path)
					}
				}
			}
			st, err := configure.LoadState(fsys)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range suffixes {
				if got := st.HandlersOf(s); !slices.Equal(got, []string{s.Handler(p)}) {
					t.Errorf("state: handlers of suffix %q = %v, want [%s]", s, got, s.Handler(p))
				}
			}

			live := func(want, gone []configure.Suffix) {
				t.Helper()
				stop := critest.StartContainerd(t, bin, sc.render(t, root, d, v), d)
				defer stop()
				cs := queryHandlers(t, d)
				for _, s := range want {
					h, ok := cs.Handlers[s.Handler(p)]
					if !ok {
						t.Errorf("handler %s not registered; containerd has %v", s.Handler(p), cs.Names())
						continue
					}
					ps := configure.Paths{Prefix: s.Prefix(), Suffix: s}
					if h.RuntimePath != ps.Shim(p) || h.Options["ConfigPath"] != ps.KataConfig(p) {
						t.Errorf("handler %s: runtime %s config %v, want %s %s", s.Handler(p), h.RuntimePath, h.Options["ConfigPath"], ps.Shim(p), ps.KataConfig(p))
					}
				}
				for _, s := range gone {
					if _, ok := cs.Handlers[s.Handler(p)]; ok {
						t.Errorf("removed handler %s still registered", s.Handler(p))
					}
				}
				if _, ok := cs.Handlers["runc"]; !ok {
					t.Errorf("the node's own runc is gone: %v", cs.Names())
				}
			}
			live(suffixes, nil)

			kept := snapshotTree(t, root)
			if _, err := configure.Remove(fsys, configure.Suffix("a").Handler(p)); err != nil {
				t.Fatal(err)
			}
			now := snapshotTree(t, root)
			for _, s := range []configure.Suffix{"", "b"} {
				for _, f := range files[s] {
					if now[f] != kept[f] {
						t.Errorf("removing suffix a changed %s of suffix %q", f, s)
					}
				}
			}
			for _, f := range files["a"] {
				if _, ok := now[f]; ok {
					t.Errorf("removing suffix a left its %s", f)
				}
			}
			live([]configure.Suffix{"", "b"}, []configure.Suffix{"a"})

			for _, s := range []configure.Suffix{"b", ""} {
				if _, err := configure.Remove(fsys, s.Handler(p)); err != nil {
					t.Fatal(err)
				}
			}
			if sc.layout == "k3s" {
				writeFile(t, main, critest.BaseConfig(d, v, ""))
			}
			if after := snapshotTree(t, root); !maps.Equal(before, after) {
				var diff []string
				for k := range after {
					if before[k] != after[k] {
						diff = append(diff, k)
					}
				}
				t.Errorf("after removing every install the tree differs from before in %s", strings.Join(diff, ", "))
			}
		})
	}
}
