package discover

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/treetest"
)

func TestParseCDISpec(t *testing.T) {
	for _, tc := range []struct {
		name, in      string
		file          string // read from testdata/cdi instead of in
		kind, version string
		errHas        string
	}{
		{name: "sandbox device plugin, kind last", file: "nvidia.com-pgpu.yaml", kind: "nvidia.com/pgpu", version: "0.5.0"},
		{name: "nvidia-ctk", file: "nvidia.yaml", kind: "nvidia.com/gpu", version: "0.5.0"},
		{name: "CDI example JSON", file: "cncf-spec-example.json", kind: "vendor.com/device", version: "0.2.0"},
		{name: "CDI minimal JSON", file: "cncf-minimal.json", kind: "vendor.com/device", version: "0.2.0"},
		{name: "quoted with comment", in: "cdiVersion: \"0.6.0\"\nkind: 'nvidia.com/GH100_H100_PCIE' # per model\n", kind: "nvidia.com/GH100_H100_PCIE", version: "0.6.0"},
		{name: "quoted key", in: "\"kind\": nvidia.com/pgpu\n", kind: "nvidia.com/pgpu"},
		{name: "plain with comment", in: "kind: nvidia.com/pgpu # sandbox\n", kind: "nvidia.com/pgpu"},
		{name: "indented kind is not top level", in: "devices:\n  - name: x\n    kind: nvidia.com/pgpu\n", errHas: "no top-level kind"},
		{name: "second document ignored", in: "kind: nvidia.com/pgpu\n---\nkind: other.com/x\n", kind: "nvidia.com/pgpu"},
		{name: "kind twice", in: "kind: nvidia.com/pgpu\nkind: nvidia.com/gpu\n", errHas: "line 2: kind again (first on line 1)"},
		{name: "kind without class", in: "cdiVersion: 0.5.0\nkind: nvidia.com\n", errHas: `line 2: kind "nvidia.com": want vendor/class`},
		{name: "not a mapping", in: "just text\n", errHas: "line 1:"},
		{name: "empty", in: "", errHas: "no top-level kind"},
		{name: "JSON without kind", in: `{"cdiVersion": "0.5.0"}`, errHas: `no "kind"`},
		{name: "JSON bad kind", in: `{"kind": "/gpu"}`, errHas: `"kind" "/gpu"`},
		{name: "JSON broken", in: `{"kind": `, errHas: "JSON:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			if tc.file != "" {
				var err error
				if in, err = os.ReadFile(filepath.Join("testdata", "cdi", tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			kind, version, err := parseCDISpec(in)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("err = %v, want one containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil || kind != tc.kind || version != tc.version {
				t.Fatalf("= %q, %q, %v; want %q, %q", kind, version, err, tc.kind, tc.version)
			}
		})
	}
}

func FuzzParseCDISpec(f *testing.F) {
	f.Add([]byte("kind: nvidia.com/pgpu\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		kind, _, err := parseCDISpec(in)
		if err == nil && !validCDIKind(kind) {
			t.Fatalf("accepted kind %q", kind)
		}
	})
}

// TestCDISpecsListing builds a root with both spec directories and checks
// what discovery lists: only .json and .yaml files, in directory order,
// with the reason for a file that does not parse.
func TestCDISpecsListing(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) { treetest.Write(t, dir, p, s) }
	pgpu, err := os.ReadFile(filepath.Join("testdata", "cdi", "nvidia.com-pgpu.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write("etc/cdi/nvidia.yaml", "kind: nvidia.com/gpu\n")
	write("etc/cdi/README", "not a spec")
	write("etc/cdi/broken.json", "{")
	write("var/run/cdi/nvidia.com-pgpu.yaml", string(pgpu))
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := &session{root: root}
	got := cdiSpecs(s)
	want := []facts.CDISpec{
		{Path: "/etc/cdi/broken.json", Error: "unparseable: /etc/cdi/broken.json: JSON: unexpected end of JSON input"},
		{Path: "/etc/cdi/nvidia.yaml", Kind: "nvidia.com/gpu"},
		{Path: "/var/run/cdi/nvidia.com-pgpu.yaml", Kind: "nvidia.com/pgpu"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("spec %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if len(s.unknown) != 0 {
		t.Errorf("unknown = %v, want none (a missing directory holds no specs)", s.unknown)
	}
}

// BenchmarkGPUConfigFacts measures what the CDI listing and the handlers'
// Kata guests add to a discovery run, on the fixture with kata-deploy's
// GPU handler and the sandbox device plugin's specification.
func BenchmarkGPUConfigFacts(b *testing.B) {
	root, err := hostfs.OpenDir(filepath.Join(hostsDir, "h100-snp-cc-on"))
	if err != nil {
		b.Fatal(err)
	}
	s := &session{root: root}
	rt := containerdFacts(s, "k3s", nil)
	if rt == nil || len(rt.Handlers) == 0 {
		b.Fatal("no containerd handlers in the fixture")
	}
	b.ReportAllocs()
	for b.Loop() {
		if specs := cdiSpecs(s); len(specs) != 1 {
			b.Fatalf("CDI specs %v", specs)
		}
		kataGuests(s, rt)
	}
}
