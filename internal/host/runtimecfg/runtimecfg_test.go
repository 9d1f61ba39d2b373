package runtimecfg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/goldenfile"
	"berth.dev/berth/internal/testkit/treetest"
	"berth.dev/berth/internal/testkit/upstreamtest"
)

func TestParseContainerdGolden(t *testing.T) {
	for _, f := range []string{
		"containerd-v2-kata.toml",
		"k3s-config.toml",
		"v3-misplaced.toml",
		"v1-legacy.toml",
		"v3imports/etc/containerd/config.toml",
		"v3imports/etc/containerd/conf.d/10-kata.toml",
	} {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", f))
			if err != nil {
				t.Fatal(err)
			}
			c, err := ParseContainerd(f, data)
			if err != nil {
				t.Fatalf("ParseContainerd: %v", err)
			}
			goldenfile.AssertJSON(t, filepath.Join("testdata", "golden", "containerd-"+strings.NewReplacer("/", "_", ".toml", "").Replace(f)+".json"), c)
		})
	}
}

func TestParseContainerdFacts(t *testing.T) {
	tests := []struct {
		name, doc     string
		version       int
		handlers      []string
		snapshotter   string
		misplaced     int
		wantSnapshots []string
	}{
		{name: "no version means 1", doc: "[plugins.cri.containerd.runtimes.kata]\nruntime_type = 'io.containerd.kata.v2'\n", version: 1, handlers: []string{"kata"}},
		{name: "v2 reads grpc plugin", doc: "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = 'devmapper'\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.kata-fc]\nruntime_type = 'io.containerd.kata-fc.v2'\n", version: 2, handlers: []string{"kata-fc"}, snapshotter: "devmapper"},
		{name: "v2 ignores v3 keys", doc: "version = 2\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.kata]\nruntime_type = 'x'\n", version: 2, misplaced: 1},
		{name: "v3 reads images snapshotter", doc: "version = 3\n[plugins.'io.containerd.cri.v1.images']\nsnapshotter = 'nydus'\n[plugins.'io.containerd.grpc.v1.cri'.containerd]\nsnapshotter = 'ignored'\n", version: 3, snapshotter: "nydus"},
		{name: "v4 like v3", doc: "version = 4\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.kata]\n", version: 4, handlers: []string{"kata"}},
		{name: "proxy snapshotters", doc: "version = 3\n[proxy_plugins.nydus]\ntype = 'snapshot'\naddress = '/run/n.sock'\n[proxy_plugins.stargz]\ntype = 'snapshot'\n[proxy_plugins.other]\ntype = 'content'\n", version: 3, wantSnapshots: []string{"nydus", "stargz"}},
		{name: "configured block snapshotters", doc: "version = 2\n[plugins.'io.containerd.snapshotter.v1.devmapper']\npool_name = 'containerd-pool'\n[plugins.'io.containerd.snapshotter.v1.blockfile']\nscratch_file = '/var/lib/containerd/scratch'\n", version: 2, wantSnapshots: []string{"devmapper", "blockfile"}},
		{name: "devmapper without pool is not loaded", doc: "version = 2\n[plugins.'io.containerd.snapshotter.v1.devmapper']\nroot_path = '/x'\n", version: 2},
		{name: "empty file", doc: "", version: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseContainerd("config.toml", []byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			if c.Version != tt.version {
				t.Errorf("Version = %d, want %d", c.Version, tt.version)
			}
			var names []string
			for _, h := range c.Handlers {
				names = append(names, h.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.handlers, ",") {
				t.Errorf("handlers = %v, want %v", names, tt.handlers)
			}
			if c.Snapshotter != tt.snapshotter {
				t.Errorf("Snapshotter = %q, want %q", c.Snapshotter, tt.snapshotter)
			}
			if len(c.Misplaced) != tt.misplaced {
				t.Errorf("Misplaced = %v, want %d", c.Misplaced, tt.misplaced)
			}
			if got := strings.Join(c.Snapshotters(), ","); got != strings.Join(tt.wantSnapshots, ",") {
				t.Errorf("Snapshotters() = %s, want %v", got, tt.wantSnapshots)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, doc  string
		crio       bool
		line, col  int
		msgContain string
	}{
		{name: "unterminated table", doc: "version = 2\n\n[plugins.\"io.containerd.grpc.v1.cri\"\n", line: 3, col: 37, msgContain: "config.toml:3:37: expected ']'"},
		{name: "bad value", doc: "version = 2\nroot = /var/lib\n", line: 2, col: 8},
		{name: "version wrong type", doc: "version = \"2\"\n", line: 1, col: 11, msgContain: "key version: expected an integer, got a TOML string"},
		{name: "version unsupported", doc: "# c\n  version = 7\n", line: 2, col: 3, msgContain: "unsupported config version 7"},
		{name: "annotations wrong type", doc: "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.kata]\npod_annotations = 'io.katacontainers.*'\n", line: 3, col: 19, msgContain: `key plugins."io.containerd.cri.v1.runtime".containerd.runtimes.kata.pod_annotations: expected an array of strings, got a TOML string`},
		{name: "enable_cdi wrong type", doc: "version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nenable_cdi = 'yes'\n", line: 3, col: 14, msgContain: `key plugins."io.containerd.grpc.v1.cri".enable_cdi: expected a boolean, got a TOML string`},
		{name: "duplicate key", doc: "version = 2\nversion = 3\n", line: 2, col: 1},
		{name: "crio bad bool", crio: true, doc: "[crio.runtime.runtimes.kata]\nprivileged_without_host_devices = \"yes\"\n", line: 2, col: 35},
		{name: "crio garbage", crio: true, doc: "[crio.runtime]\ndefault_runtime = \n", line: 2, col: 19},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.crio {
				_, err = ParseCRIO("config.toml", []byte(tt.doc))
			} else {
				_, err = ParseContainerd("config.toml", []byte(tt.doc))
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if pe.Line != tt.line || pe.Column != tt.col {
				t.Errorf("position = %d:%d, want %d:%d (%v)", pe.Line, pe.Column, tt.line, tt.col, err)
			}
			if pe.File != "config.toml" || !strings.HasPrefix(err.Error(), "config.toml:") {
				t.Errorf("error %q does not start with the file name", err)
			}
			if !strings.Contains(err.Error(), tt.msgContain) {
				t.Errorf("error %q does not contain %q", err, tt.msgContain)
			}
		})
	}
}

func TestLoadContainerdImports(t *testing.T) {
	fsys := os.DirFS("testdata/v3imports")
	l := LoadContainerd(fsys, "etc/containerd/config.toml", nil)
	if len(l.Errors) > 0 {
		t.Fatalf("errors: %v", l.Errors)
	}
	goldenfile.AssertJSON(t, "testdata/golden/load-v3imports.json", l)
	var clh Handler
	for _, h := range l.Config.Handlers {
		if h.Name == "kata-clh" {
			clh = h
		}
	}
	// 20-override.toml turns privileged_without_host_devices off and moves
	// ConfigPath, but keeps runtime_type from 10-kata.toml.
	if clh.PrivilegedWithoutHostDevices || clh.ConfigPath != "/etc/kata-containers/configuration-clh.toml" ||
		clh.RuntimeType != "io.containerd.kata-clh.v2" || clh.Source != "etc/containerd/conf.d/20-override.toml" {
		t.Errorf("merged kata-clh = %+v", clh)
	}
}

func TestLoadContainerdBadImport(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) { treetest.Write(t, dir, p, s) }
	write("etc/containerd/config.toml", "version = 2\nimports = ['conf.d/*.toml', '/etc/containerd/missing.toml', '../../../../x.toml']\n")
	write("etc/containerd/conf.d/a.toml", "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.kata]\nruntime_type = 'io.containerd.kata.v2'\n")
	write("etc/containerd/conf.d/b.toml", "version = 2\n[plugins\n")
	// An import cycle: c imports itself through the glob.
	write("etc/containerd/conf.d/c.toml", "version = 2\nimports = ['*.toml']\n")
	l := LoadContainerd(os.DirFS(dir), "etc/containerd/config.toml", nil)
	if l.Config == nil || len(l.Config.Handlers) != 1 {
		t.Fatalf("config = %+v, want the handler of a.toml", l.Config)
	}
	want := []string{"etc/containerd/config.toml", "etc/containerd/conf.d/a.toml", "etc/containerd/conf.d/c.toml"}
	if strings.Join(l.Files, " ") != strings.Join(want, " ") {
		t.Errorf("Files = %v, want %v", l.Files, want)
	}
	var msgs []string
	for _, e := range l.Errors {
		msgs = append(msgs, e.Error())
	}
	got := strings.Join(msgs, "\n")
	for _, w := range []string{"leaves the host root", "etc/containerd/conf.d/b.toml:2:", "missing.toml"} {
		if !strings.Contains(got, w) {
			t.Errorf("errors %q lack %q", got, w)
		}
	}
}

func TestLoadCRIO(t *testing.T) {
	l := LoadCRIO(os.DirFS("testdata/crio"), "etc/crio/crio.conf", "etc/crio/crio.conf.d")
	if len(l.Errors) > 0 {
		t.Fatalf("errors: %v", l.Errors)
	}
	goldenfile.AssertJSON(t, "testdata/golden/load-crio.json", l)
	if l.Config.DefaultRuntime != "runc" {
		t.Errorf("DefaultRuntime = %q, want runc from 99-override.conf", l.Config.DefaultRuntime)
	}
}

func TestLoadCRIONoMain(t *testing.T) {
	l := LoadCRIO(os.DirFS(t.TempDir()), "etc/crio/crio.conf", "etc/crio/crio.conf.d")
	if len(l.Errors) != 0 || l.Config == nil || len(l.Files) != 0 {
		t.Errorf("LoadCRIO on an empty root = %+v, want an empty config without errors", l)
	}
}

func TestFSPath(t *testing.T) {
	tests := []struct {
		from, p, want string
		ok            bool
	}{
		{"etc/containerd/config.toml", "/etc/containerd/conf.d/*.toml", "etc/containerd/conf.d/*.toml", true},
		{"etc/containerd/config.toml", "conf.d/x.toml", "etc/containerd/conf.d/x.toml", true},
		{"etc/containerd/config.toml", "../../../x", "", false},
		{"etc/containerd/config.toml", "/", ".", true},
	}
	for _, tt := range tests {
		got, ok := FSPath(tt.from, tt.p)
		if got != tt.want || ok != tt.ok {
			t.Errorf("FSPath(%q, %q) = %q, %v; want %q, %v", tt.from, tt.p, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzContainerdConfig checks that no input makes the containerd reader
// panic and that errors always carry the file name.
func FuzzContainerdConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseContainerd("config.toml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config.toml") {
				t.Fatalf("error without file name: %v", err)
			}
			return
		}
		if c.Version < 1 || c.Version > MaxContainerdVersion {
			t.Fatalf("accepted version %d", c.Version)
		}
		c.Merge(c)
	})
}

// FuzzCRIOConfig checks that no input makes the CRI-O reader panic.
func FuzzCRIOConfig(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCRIO("crio.conf", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "crio.conf") {
				t.Fatalf("error without file name: %v", err)
			}
			return
		}
		c.Merge(c)
	})
}

// TestContainerdEnableCDI reads enable_cdi from the CRI plugin key of the
// file's version, as containerd does, and from the defaults real
// containerd versions print: off in 1.7, on in 2.x.
func TestContainerdEnableCDI(t *testing.T) {
	on, off := true, false
	tests := []struct {
		name string
		docs []string // main config, then imports merged in order
		want *bool
	}{
		{name: "unset", docs: []string{"version = 2\n"}},
		{name: "v2 grpc plugin", docs: []string{"version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nenable_cdi = true\n"}, want: &on},
		{name: "v3 runtime plugin", docs: []string{"version = 3\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = false\n"}, want: &off},
		{name: "v2 ignores the v3 key", docs: []string{"version = 2\n[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = true\n"}},
		{name: "v3 ignores the v2 key", docs: []string{"version = 3\n[plugins.'io.containerd.grpc.v1.cri']\nenable_cdi = true\n"}},
		{name: "an import turns it on", docs: []string{"version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nenable_cdi = false\n", "version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nenable_cdi = true\n"}, want: &on},
		{name: "an import without it keeps the main file's", docs: []string{"version = 2\n[plugins.'io.containerd.grpc.v1.cri']\nenable_cdi = true\n", "version = 2\n"}, want: &on},
		{name: "containerd 1.7 default", docs: []string{readUpstream(t, "containerd-1.7.35-config-default.toml")}, want: &off},
		{name: "containerd 2.0 default", docs: []string{readUpstream(t, "containerd-2.0.14-config-default.toml")}, want: &on},
		{name: "containerd 2.3 default", docs: []string{readUpstream(t, "containerd-2.3.7-config-default.toml")}, want: &on},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var merged *Containerd
			for i, doc := range tt.docs {
				c, err := ParseContainerd(fmt.Sprintf("config-%d.toml", i), []byte(doc))
				if err != nil {
					t.Fatal(err)
				}
				if merged == nil {
					merged = c
				} else {
					merged = merged.Merge(c)
				}
			}
			if got := merged.EnableCDI; (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Errorf("EnableCDI = %s, want %s", boolPtr(got), boolPtr(tt.want))
			}
		})
	}
}

func readUpstream(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(upstreamtest.Path(t, "runtime-configs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func boolPtr(p *bool) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}
