package catalog_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testhosts"
	"berth.dev/berth/platform"
)

// factPath resolves a dotted fact path (as checks declare it and as
// discovery names unknown facts) against the Facts type, by JSON names. A
// map's key is one segment ("devices.nodes.dev/kvm"), as is the name of an
// element of a list whose elements have a "name" ("binaries.qemu.path",
// "runtimes.containerd.handlers.runc.runtimeType"); other lists are
// transparent. named reports whether the last segment was such a key or
// name (which the type cannot vouch for) rather than a field.
func factPath(path string) (ok, named bool) {
	t := reflect.TypeFor[facts.Facts]()
	for seg := range strings.SplitSeq(path, ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Slice {
			t = t.Elem()
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			if t.Kind() == reflect.Struct && jsonField(t, "name") != nil {
				named = true
				continue
			}
		}
		named = false
		switch t.Kind() {
		case reflect.Map:
			t, named = t.Elem(), true
		case reflect.Struct:
			f := jsonField(t, seg)
			if f == nil {
				return false, false
			}
			t = f.Type
		default:
			return false, false
		}
	}
	return true, named
}

func jsonField(t reflect.Type, name string) *reflect.StructField {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return &f
		}
	}
	return nil
}

// emitted are the fact paths discovery emits on the fixture hosts: every
// path of their Facts JSON (list elements by name where they have one),
// and every fact they list as unknown.
type emitted map[string]bool

func (e emitted) walk(prefix string, v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			e[p] = true
			e.walk(p, c)
		}
	case []any:
		for _, c := range v {
			if m, ok := c.(map[string]any); ok {
				if name, ok := m["name"].(string); ok {
					e[prefix+"."+name] = true
					e.walk(prefix+"."+name, c)
					continue
				}
			}
			e.walk(prefix, c)
		}
	}
}

// has reports whether discovery emits path: the path itself or a fact
// under it; or, for a field the type declares, its object (a field left
// out of the JSON because it is empty is still emitted, as empty).
func (e emitted) has(path string) bool {
	if e[path] {
		return true
	}
	for p := range e {
		if strings.HasPrefix(p, path+".") {
			return true
		}
	}
	ok, named := factPath(path)
	if !ok || named {
		return false
	}
	i := strings.LastIndex(path, ".")
	return i < 0 || e[path[:i]]
}

// fixtureFacts discovers every fixture host, as berth facts --root does.
func fixtureFacts(t *testing.T) map[string]*facts.Facts {
	t.Helper()
	out := map[string]*facts.Facts{}
	for _, h := range testhosts.Names(t) {
		root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", h))
		if err != nil {
			t.Fatal(err)
		}
		out[h] = discover.Run(context.Background(), root, discover.Options{Now: func() time.Time { return time.Unix(0, 0) }})
	}
	return out
}

func emittedOn(t *testing.T, hosts map[string]*facts.Facts) emitted {
	t.Helper()
	e := emitted{}
	for h, f := range hosts {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		delete(doc, "unknown")
		e.walk("", doc)
		for _, m := range f.Unknown {
			if ok, _ := factPath(m.Field); !ok && !strings.HasPrefix(m.Field, "pci[") && !strings.HasPrefix(m.Field, "gpus[") && !strings.HasPrefix(m.Field, "nvswitches[") {
				t.Errorf("%s: discovery lists %q as unknown, which is no fact path", h, m.Field)
			}
			e[m.Field] = true
		}
	}
	return e
}

// declared returns every fact a check declares it reads, on any platform.
func declared(c check.Check) []string {
	set := map[string]bool{}
	for _, f := range c.Reads {
		set[f] = true
	}
	if c.ReadsFor != nil {
		for _, p := range platform.All() {
			for _, f := range c.ReadsFor(p) {
				set[f] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for f := range set {
		out = append(out, f)
	}
	sort.Strings(out)
	return out
}

// TestChecksReadWhatDiscoveryEmits: every check of the catalogue (and the
// checks made from host plug-ins) declares the facts it reads, and each
// declared fact is one discovery emits on the fixture hosts: a misspelt
// path would never be unknown, and the check would judge evidence nobody
// could read.
func TestChecksReadWhatDiscoveryEmits(t *testing.T) {
	hosts := fixtureFacts(t)
	hosts["stratovirt-openvmm (hand-made)"] = vmmHost(t)
	e := emittedOn(t, hosts)
	plugged := &facts.Facts{Plugins: facts.Plugins{
		Errors:   []facts.PluginError{{Name: "site", Message: "not executable"}},
		Findings: []facts.PluginFinding{{Plugin: "attest", ID: "tpm", Status: "fail"}},
	}}
	cs := catalog.For(plugged)
	// The plug-in checks exist only on a host with plug-in facts, which no
	// fixture host has: theirs come from the document they were made from.
	pe := emittedOn(t, map[string]*facts.Facts{"plug-ins": plugged})
	if len(cs) <= len(catalog.All()) {
		t.Fatal("no plug-in checks made from plug-in facts")
	}
	runtimeArea := 0
	for _, c := range cs {
		fields := declared(c)
		if strings.HasPrefix(c.ID, "runtime.") {
			runtimeArea++
		}
		if len(fields) == 0 {
			t.Errorf("%s declares no fact it reads (Reads, ReadsFor)", c.ID)
		}
		for _, f := range fields {
			if ok, _ := factPath(f); !ok {
				t.Errorf("%s reads %q, which is no path of the Facts document", c.ID, f)
			} else if !e.has(f) && !(strings.HasPrefix(c.ID, "plugin.") && pe.has(f)) {
				t.Errorf("%s reads %q, which discovery emits on no fixture host", c.ID, f)
			}
		}
	}
	if runtimeArea < 6 {
		t.Errorf("only %d runtime checks", runtimeArea)
	}
}

// vmmHost discovers a hand-made root with the two hypervisors no fixture
// host has installed, StratoVirt (openEuler's package puts it in
// /usr/bin, where Kata's Makefile STRATOVIRTPATH points) and OpenVMM
// (under kata-deploy's /opt/kata/bin), with what their version flags
// print: StratoVirt's argument parser answers -V with "StratoVirt
// <version>" (util/src/arg_parser.rs show_version). It fails unless
// discovery reports both binaries with their versions.
func vmmHost(t *testing.T) *facts.Facts {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"usr/bin/stratovirt", "opt/kata/bin/openvmm"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), []byte("placeholder: never executed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rec := `{"schemaVersion": 1, "commands": [
		{"argv": ["/usr/bin/stratovirt", "-V"], "stdout": "StratoVirt 2.4.0\n", "exitCode": 0},
		{"argv": ["/opt/kata/bin/openvmm", "--version"], "stdout": "openvmm 0.1.0\n", "exitCode": 0}]}`
	if err := os.MkdirAll(filepath.Join(dir, ".berth"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".berth", "recorded.json"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := discover.Run(context.Background(), root, discover.Options{Now: func() time.Time { return time.Unix(0, 0) }})
	want := map[string]string{"stratovirt": "2.4.0", "openvmm": "0.1.0"}
	for _, b := range f.Binaries {
		if v, ok := want[b.Name]; ok {
			if b.Version != v {
				t.Errorf("binaries.%s at %s: version %q, want %q", b.Name, b.Path, b.Version, v)
			}
			delete(want, b.Name)
		}
	}
	for name := range want {
		t.Errorf("discovery did not report binaries.%s", name)
	}
	return f
}

// TestRuntimeEvidenceIsFacts: the evidence of every runtime and snapshotter
// finding on every fixture host names a fact path, so that a reader (and
// berth facts) can find it.
func TestRuntimeEvidenceIsFacts(t *testing.T) {
	for h, f := range fixtureFacts(t) {
		e, err := check.NewEvaluator(catalog.For(f))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, v := range e.Evaluate(f, platform.All(), check.Options{}) {
			for _, fd := range v.Findings {
				if !strings.HasPrefix(fd.ID, "runtime.") && !strings.HasPrefix(fd.ID, "snapshotter.") {
					continue
				}
				for _, ev := range fd.Evidence {
					if seen[fd.ID+" "+ev.Field] {
						continue
					}
					seen[fd.ID+" "+ev.Field] = true
					if ok, _ := factPath(ev.Field); !ok {
						t.Errorf("%s: %s gives evidence %q, which is no fact path", h, fd.ID, ev.Field)
					}
				}
			}
		}
	}
}

func TestFactPath(t *testing.T) {
	for _, tc := range []struct {
		path      string
		ok, named bool
	}{
		{"runtimes.containerd.configError", true, false},
		{"runtimes.configPath", false, false},
		{"runtimes.containerd.handlers.kata-qemu.runtimeType", true, false},
		{"runtimes.containerd.handlers.kata-qemu", true, true},
		{"devices.nodes.dev/kvm", true, true},
		{"devices.nodes.dev/kvm.exists", true, false},
		{"binaries.qemu.path", true, false},
		{"gpus", true, false},
		{"gpus.vfioBound", true, false},
		{"tee.snp.noSuchFact", false, false},
	} {
		if ok, named := factPath(tc.path); ok != tc.ok || named != tc.named {
			t.Errorf("factPath(%q) = %v, %v; want %v, %v", tc.path, ok, named, tc.ok, tc.named)
		}
	}
	e := emitted{"devices": true, "devices.nodes": true, "devices.nodes.dev/kvm": true, "runtimes": true, "runtimes.crio": true}
	for path, want := range map[string]bool{
		"devices.nodes.dev/kvm":      true,
		"devices.nodes.dev/kvmm":     false, // a key the type cannot vouch for
		"runtimes.crio.handlers":     true,  // an empty list, left out
		"runtimes.containerd.binary": false, // no containerd on any host
		"devices":                    true,
	} {
		if got := e.has(path); got != want {
			t.Errorf("has(%q) = %v, want %v", path, got, want)
		}
	}
}
