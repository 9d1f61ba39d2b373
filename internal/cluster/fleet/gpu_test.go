package fleet

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/testkit/goldenfile"
)

// TestFleetGPUView: the reports of the GPU fixtures, as the agent
// publishes them (with the Node's allocatable), give one GPU row per
// hardware class with the nodes' CC modes and advertised GPUs, and a node
// whose GPU is in another CC mode than its class stands out.
func TestFleetGPUView(t *testing.T) {
	var nodes []Node
	add := func(host, node string, alloc corev1.ResourceList) {
		nodes = append(nodes, fixtureNode(t, host, node, func(r *v1alpha1.Report) { *r = nodereport.WithGPUResources(*r, alloc) }))
	}
	pgpu := func(n string) corev1.ResourceList {
		return corev1.ResourceList{"nvidia.com/pgpu": resource.MustParse(n)}
	}
	add("hgx-h100-tdx-ppcie", "hgx-1", pgpu("8"))
	add("hgx-h100-tdx-ppcie", "hgx-2", nil)
	add("h100-snp-cc-on", "h100-1", pgpu("1"))
	add("h100-snp-cc-on", "h100-2", pgpu("1"))
	add("h100-snp-cc-off", "h100-3", nil)
	add("snp-genoa-k3s-ready", "genoa-1", nil)
	a := Analyze(nodes, nil)

	var txt bytes.Buffer
	if err := WriteText(&txt, a); err != nil {
		t.Fatal(err)
	}
	goldenfile.Assert(t, filepath.Join("testdata", "fleet-gpu.txt"), txt.Bytes())
	if len(a.GPUs) != 2 {
		t.Fatalf("GPU classes %+v, want the HGX and the H100 PCIe class", a.GPUs)
	}
	for _, want := range []struct {
		classHas          string
		nodes             int
		modes, passthough []ValueCount
	}{
		{"8x ", 2, []ValueCount{{"ppcie", 2}}, []ValueCount{{"0", 1}, {"8", 1}}},
		{"nvidia:2331", 3, []ValueCount{{"on", 2}, {"off", 1}}, []ValueCount{{"1", 2}, {"0", 1}}},
	} {
		found := false
		for _, c := range a.GPUs {
			if !strings.Contains(c.Class, want.classHas) {
				continue
			}
			found = true
			if c.Nodes != want.nodes || !reflect.DeepEqual(c.CCModes, want.modes) || !reflect.DeepEqual(c.Passthrough, want.passthough) {
				t.Errorf("class %s: %+v, want %d nodes, CC modes %v, passthrough %v", c.Class, c, want.nodes, want.modes, want.passthough)
			}
		}
		if !found {
			t.Errorf("no GPU class containing %q in %+v", want.classHas, a.GPUs)
		}
	}
	if !strings.Contains(txt.String(), "h100-3 [") || !strings.Contains(txt.String(), "gpu.ccMode is off; 2 of 3 nodes have on") {
		t.Errorf("the node with CC off is not an outlier of its class:\n%s", txt.String())
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, a, epoch); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), `<table id="gpus">`) || !strings.Contains(page.String(), "<td>ppcie (2)</td>") {
		t.Errorf("the HTML page has no GPU table with the HGX class's CC mode")
	}
	for _, c := range a.GPUs {
		if strings.Contains(c.Class, "genoa") && !strings.Contains(c.Class, "/") {
			t.Errorf("a class without GPUs is listed: %+v", c)
		}
	}
}
