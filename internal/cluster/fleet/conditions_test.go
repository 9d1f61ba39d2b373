package fleet

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
)

// TestFleetConditions: berth fleet reads each report's conditions and
// summarises them per hardware class, naming the nodes that are not
// Installed or Degraded with the reason; a report without conditions
// (an older agent) is counted nowhere.
func TestFleetConditions(t *testing.T) {
	withConditions := func(node string, install *v1alpha1.InstallStatus, prevInstalled bool) *unstructured.Unstructured {
		u := fixtureObject(t, "snp-genoa-k3s-ready", node)
		var r v1alpha1.Report
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object["report"].(map[string]any), &r); err != nil {
			t.Fatal(err)
		}
		r.Install = install
		prev := nodereport.Conditions(nil, r, epoch)
		if prevInstalled {
			ok := r
			ok.Install = &v1alpha1.InstallStatus{Platforms: []v1alpha1.PlatformInstall{{Name: "k3s-qemu-snp", State: v1alpha1.InstallInstalled}}}
			prev = nodereport.Conditions(nil, ok, epoch)
		}
		conds := nodereport.Conditions(prev, r, epoch)
		st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&v1alpha1.NodeReportStatus{Conditions: conds})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["status"] = st
		return u
	}
	installed := &v1alpha1.InstallStatus{Platforms: []v1alpha1.PlatformInstall{{Name: "k3s-qemu-snp", State: v1alpha1.InstallInstalled}}}
	failed := &v1alpha1.InstallStatus{Platforms: []v1alpha1.PlatformInstall{{Name: "k3s-qemu-snp", State: v1alpha1.InstallFailed, Error: "handler not live"}}}
	var nodes []Node
	for _, u := range []*unstructured.Unstructured{
		withConditions("n1", installed, false),
		withConditions("n2", failed, true),
		withConditions("n3", failed, false),
		withConditions("n4", nil, false),
		fixtureObject(t, "snp-genoa-k3s-ready", "old-agent"),
	} {
		n, err := decodeU(u)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	a := Analyze(nodes, nil)
	if len(a.Conditions) != 1 {
		t.Fatalf("conditions per class: %+v", a.Conditions)
	}
	c := a.Conditions[0]
	if c.Nodes != 4 || c.Ready != 4 || c.Installed != 1 || c.Degraded != 1 {
		t.Errorf("summary %+v: want 4 nodes with conditions, 4 Ready, 1 Installed, 1 Degraded", c)
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, a); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"NODES  READY  INSTALLED  DEGRADED",
		"4      4/4    1/4        1",
		"Degraded: n2 (" + nodereport.ReasonInstallFailed + ")",
		"not Installed: n2 (InstallFailed), n3 (InstallFailed), n4 (NotInstalled)",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the text view lacks %q:\n%s", want, buf.String())
		}
	}
}
