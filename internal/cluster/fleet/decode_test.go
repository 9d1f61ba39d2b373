package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/evaluate/preflight"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/goldenfile"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixtureObject is the NodeReport object the agent would publish for a
// fixture host under the given node name.
func fixtureObject(t testing.TB, host, node string) *unstructured.Unstructured {
	t.Helper()
	root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", host))
	if err != nil {
		t.Fatal(err)
	}
	res, err := preflight.Run(context.Background(), root, preflight.Options{Discover: discover.Options{Now: func() time.Time { return epoch }}, NoDebug: true})
	if err != nil {
		t.Fatal(err)
	}
	nr := v1alpha1.NodeReport{Report: nodereport.Build(node, "v0.1.0", res.Facts, res.Verdicts, epoch)}
	nr.APIVersion, nr.Kind, nr.Name = v1alpha1.SchemeGroupVersion.String(), v1alpha1.Kind, node
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&nr)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// fixtureNode is the analysis model of a fixture host's report, as
// decoded from the NodeReport object, after edit (when not nil) changed
// the report.
func fixtureNode(t testing.TB, host, node string, edit func(*v1alpha1.Report)) Node {
	t.Helper()
	u := fixtureObject(t, host, node)
	if edit != nil {
		var r v1alpha1.Report
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object["report"].(map[string]any), &r); err != nil {
			t.Fatal(err)
		}
		edit(&r)
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&r)
		if err != nil {
			t.Fatal(err)
		}
		u.Object["report"] = m
	}
	n, err := decodeU(u)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func decodeU(u *unstructured.Unstructured) (Node, error) {
	b, err := u.MarshalJSON()
	if err != nil {
		return Node{}, err
	}
	return Decode(b)
}

func TestDecodeMalformed(t *testing.T) {
	good := fixtureObject(t, "snp-genoa-k3s-ready", "n1")
	if _, err := decodeU(good); err != nil {
		t.Fatalf("a good report: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(o map[string]any)
		want string
	}{
		{"wrong version", func(o map[string]any) { o["apiVersion"] = "berth.dev/v9" }, `apiVersion "berth.dev/v9"`},
		{"wrong kind", func(o map[string]any) { o["kind"] = "Node" }, `kind "Node"`},
		{"no report", func(o map[string]any) { delete(o, "report") }, "report: missing"},
		{"report not an object", func(o map[string]any) { o["report"] = "x" }, "decoding: json: cannot unmarshal string"},
		{"no node name", func(o map[string]any) { delete(o["report"].(map[string]any), "nodeName") }, "report.nodeName: missing"},
		{"other node", func(o map[string]any) { o["report"].(map[string]any)["nodeName"] = "n2" }, `expected the object's name "n1"`},
		{"no hash", func(o map[string]any) { delete(o["report"].(map[string]any), "contentHash") }, "contentHash: missing"},
		{"mistyped", func(o map[string]any) { o["report"].(map[string]any)["summary"] = []any{"x"} }, "decoding: json: cannot unmarshal array"},
		{"bad verdict", func(o map[string]any) {
			o["report"].(map[string]any)["platforms"].([]any)[0].(map[string]any)["verdict"] = "maybe"
		}, `report.platforms[0].verdict "maybe"`},
		{"unnamed platform", func(o map[string]any) {
			delete(o["report"].(map[string]any)["platforms"].([]any)[1].(map[string]any), "name")
		}, "report.platforms[1].name: missing"},
		{"bad install state", func(o map[string]any) {
			o["report"].(map[string]any)["install"] = map[string]any{"platforms": []any{map[string]any{"name": "k3s-qemu-snp", "state": "exploded"}}}
		}, `report.install.platforms[0].state "exploded"`},
		{"unnamed install platform", func(o map[string]any) {
			o["report"].(map[string]any)["install"] = map[string]any{"platforms": []any{map[string]any{"state": "failed"}}}
		}, "report.install.platforms[0].name: missing"},
		{"install not an object", func(o map[string]any) { o["report"].(map[string]any)["install"] = "installed" }, "decoding: json: cannot unmarshal string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := good.DeepCopy()
			tc.edit(u.Object)
			_, err := decodeU(u)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// fleetFixture is a small fleet from the fixture hosts: three identical
// Genoa nodes and one with an older kernel, two TDX nodes, a Milan node
// with SNP off in the BIOS and a malformed report.
func fleetFixture(t testing.TB) ([]Node, []Malformed) {
	t.Helper()
	var nodes []Node
	add := func(host, node string, edit func(*v1alpha1.Report)) {
		nodes = append(nodes, fixtureNode(t, host, node, edit))
	}
	// The node-installer's records: installed on genoa-1 and -2, failed on
	// genoa-3, an older release on genoa-4, TDX installed and SNP not
	// ready on tdx-1; none on the others.
	release := func(version string, ps ...v1alpha1.PlatformInstall) func(*v1alpha1.Report) {
		return func(r *v1alpha1.Report) {
			r.Install = &v1alpha1.InstallStatus{Version: version, Digest: "sha256:" + strings.Repeat(version[:1]+version[3:4], 32), Time: metav1.NewTime(epoch), Platforms: ps}
		}
	}
	snpOK := v1alpha1.PlatformInstall{Name: "k3s-qemu-snp", Handler: "kata-qemu-snp", State: v1alpha1.InstallInstalled}
	for _, n := range []string{"genoa-1", "genoa-2"} {
		add("snp-genoa-k3s-ready", n, release("3.24.0", snpOK))
	}
	add("snp-genoa-k3s-ready", "genoa-3", release("3.24.0", v1alpha1.PlatformInstall{Name: "k3s-qemu-snp", Handler: "kata-qemu-snp", State: v1alpha1.InstallFailed,
		Error: "platform k3s-qemu-snp: finding the running container runtime: unit containerd.service is not active"}))
	add("snp-genoa-k3s-ready", "genoa-4", func(r *v1alpha1.Report) {
		r.Facts.KernelRelease = "6.8.0-40-generic"
		release("3.23.0", snpOK)(r)
	})
	add("tdx-emr-kubeadm-ready", "tdx-1", release("3.24.0",
		v1alpha1.PlatformInstall{Name: "kubeadm-qemu-tdx", Handler: "kata-qemu-tdx", State: v1alpha1.InstallInstalled},
		v1alpha1.PlatformInstall{Name: "kubeadm-qemu-snp", Handler: "kata-qemu-snp", State: v1alpha1.InstallNotReady, Error: "snp.cpu.generation: the CPU is not an AMD EPYC"}))
	add("tdx-hibernation", "tdx-2", nil)
	add("snp-milan-bios-off", "milan-1", nil)
	return nodes, []Malformed{{Name: "broken-1", Reason: `apiVersion "berth.dev/v0": expected berth.dev/v1alpha1`}}
}

func TestFleetViewsGolden(t *testing.T) {
	nodes, bad := fleetFixture(t)
	a := Analyze(nodes, bad)
	var txt, js, page bytes.Buffer
	if err := WriteText(&txt, a); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&js)
	enc.SetIndent("", "  ")
	if err := enc.Encode(a); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, a, epoch); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"fleet.txt": txt.Bytes(), "fleet.json": js.Bytes(), "fleet.html": page.Bytes()} {
		goldenfile.Assert(t, filepath.Join("testdata", name), got)
	}
	// The outlier is the node with the other kernel, spelled out.
	if !strings.Contains(txt.String(), "genoa-4 [amd genoa]: kernel.release is 6.8.0-40-generic; 3 of 4 nodes have 6.14.0-29-generic") {
		t.Errorf("the kernel outlier is not spelled out:\n%s", txt.String())
	}
	// The failed install is listed with its node, release and error.
	if !strings.Contains(txt.String(), "genoa-3: k3s-qemu-snp (3.24.0@sha256:343434343434): platform k3s-qemu-snp: finding the running container runtime: unit containerd.service is not active") {
		t.Errorf("the failed install is not listed with its error:\n%s", txt.String())
	}
	if a.InstallNodes != 5 || len(a.InstallFailures) != 1 || !strings.Contains(page.String(), "unit containerd.service is not active") {
		t.Errorf("install: %d nodes reporting, failures %+v", a.InstallNodes, a.InstallFailures)
	}
	if !strings.Contains(txt.String(), "broken-1") {
		t.Error("the malformed report is not listed")
	}
	// Self-contained: nothing is fetched from anywhere.
	for _, bad := range []string{"http://", "https://", "src=", "@import", "url("} {
		if bytes.Contains(page.Bytes(), []byte(bad)) {
			t.Errorf("the HTML page references %q", bad)
		}
	}
}
