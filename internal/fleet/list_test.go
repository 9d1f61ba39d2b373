package fleet

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"

	"berth.dev/berth/api/v1alpha1"
)

// TestListGoesOnPastMalformed: a report with a missing or mistyped field
// is listed as malformed and the others are still read.
func TestListGoesOnPastMalformed(t *testing.T) {
	good1 := fixtureObject(t, "snp-genoa-k3s-ready", "n1")
	good2 := fixtureObject(t, "tdx-emr-kubeadm-ready", "n2")
	noReport := fixtureObject(t, "snp-genoa-k3s-ready", "bad-1")
	delete(noReport.Object, "report")
	mistyped := fixtureObject(t, "snp-genoa-k3s-ready", "bad-2")
	mistyped.Object["report"].(map[string]any)["platforms"] = "all of them"
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{v1alpha1.GroupVersionResource: "NodeReportList"},
		good1, good2, noReport, mistyped)
	nodes, bad, err := List(context.Background(), dyn, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 2 || len(bad) != 2 {
		t.Fatalf("%d nodes, malformed %+v", len(nodes), bad)
	}
	a := Analyze(nodes, bad)
	if a.Nodes != 2 || len(a.Malformed) != 2 || a.Malformed[0].Name != "bad-1" {
		t.Errorf("%+v", a.Malformed)
	}
}
