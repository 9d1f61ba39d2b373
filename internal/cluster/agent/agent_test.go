package agent

import (
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	corev1 "k8s.io/api/core/v1"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodelabels"
	"berth.dev/berth/internal/cluster/nodereport"
)

func TestBackoff(t *testing.T) {
	a := &Agent{cfg: Config{BackoffInitial: time.Second, BackoffMax: 8 * time.Second}}
	for n, want := range []time.Duration{1, 2, 4, 8, 8, 8} {
		want *= time.Second
		for range 50 {
			d := a.backoff(n)
			if d < want*8/10 || d > want*12/10 {
				t.Fatalf("backoff(%d) = %s, want %s ±20%%", n, d, want)
			}
		}
	}
	if d := a.backoff(1000); d > 10*time.Second {
		t.Errorf("backoff(1000) = %s: not capped", d)
	}
}

func TestLabelsDiffer(t *testing.T) {
	want := map[string]string{nodereport.TEELabel: "snp", nodereport.KVMLabel: "true", nodereport.PlatformLabelPrefix + "k3s-qemu-snp": "true"}
	// withWant is want plus one more label set to "true".
	withWant := func(extra string) map[string]string {
		m := maps.Clone(want)
		m[extra] = "true"
		return m
	}
	same := map[string]string{"kubernetes.io/hostname": "n1", "berth.dev/other": "kept"}
	for k, v := range want {
		same[k] = v
	}
	for _, tc := range []struct {
		name string
		have map[string]string
		diff bool
	}{
		{"same plus foreign labels", same, false},
		{"missing", map[string]string{nodereport.TEELabel: "snp"}, true},
		{"changed", map[string]string{nodereport.TEELabel: "none", nodereport.KVMLabel: "true", nodereport.PlatformLabelPrefix + "k3s-qemu-snp": "true"}, true},
		{"stale platform", withWant(nodereport.PlatformLabelPrefix + "gone"), true},
		{"stale but set by someone else", map[string]string{nodereport.TEELabel: "snp", nodereport.KVMLabel: "true",
			nodereport.PlatformLabelPrefix + "k3s-qemu-snp": "true", nodereport.PlatformLabelPrefix + "theirs": "true"}, false},
		// kata-deploy's TEE label the agent published (--kata-deploy-labels)
		// and no longer wants: removed; the same label NFD set: left alone.
		{"stale kata-deploy label", withWant("amd.feature.node.kubernetes.io/snp"), true},
		{"kata-deploy label set by NFD", withWant("intel.feature.node.kubernetes.io/tdx"), false},
	} {
		owned := map[string]bool{nodereport.PlatformLabelPrefix + "gone": true, "amd.feature.node.kubernetes.io/snp": true}
		if got := nodelabels.Differ(tc.have, want, owned, isOwnLabel); got != tc.diff {
			t.Errorf("%s: Differ = %v, want %v", tc.name, got, tc.diff)
		}
	}
}

func TestOwnedLabels(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
		{Manager: v1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:berth.dev/tee":{},"f:berth.dev/kvm":{}}}}`)}},
		{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:berth.dev/platform.x":{}}}}`)}},
	}}}
	got := nodelabels.Owned(node, v1alpha1.FieldManager)
	if len(got) != 2 || !got["berth.dev/tee"] || !got["berth.dev/kvm"] {
		t.Errorf("owned %v", got)
	}
}

func TestReportCurrent(t *testing.T) {
	r := v1alpha1.Report{NodeName: "n1", BerthVersion: "v1", ObservedAt: metav1.Now(), Facts: v1alpha1.FactsSummary{KernelRelease: "6.8.0"},
		Platforms: []v1alpha1.PlatformVerdict{{Name: "k3s-qemu", Verdict: v1alpha1.VerdictReady}}}
	r.ContentHash = nodereport.Hash(r)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: types.UID("uid-1")}}
	conds := nodereport.Conditions(nil, r, time.Now())
	obj, err := reportObject(node, r, v1alpha1.NodeReportStatus{Conditions: conds})
	if err != nil {
		t.Fatal(err)
	}
	// The conditions read back are those written: an unchanged report
	// and unchanged conditions are not written again.
	if got := storedConditions(obj); !nodereport.SameConditions(got, conds) {
		t.Errorf("conditions read back %+v, written %+v", got, conds)
	}
	if _, ok := obj.Object["metadata"].(map[string]any)["creationTimestamp"]; ok {
		t.Error("the apply object claims creationTimestamp")
	}
	if !reportCurrent(obj, r, node.UID) {
		t.Fatal("the object built from r is not current for r")
	}
	edit := func(f func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := obj.DeepCopy()
		f(u)
		return u
	}
	for name, u := range map[string]*unstructured.Unstructured{
		"hand edit keeping the hash": edit(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "6.1.0-edited", "report", "facts", "kernelRelease")
		}),
		"other hash": edit(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "sha256:00", "report", "contentHash")
		}),
		"no owner":        edit(func(u *unstructured.Unstructured) { u.SetOwnerReferences(nil) }),
		"no report":       edit(func(u *unstructured.Unstructured) { delete(u.Object, "report") }),
		"mistyped report": edit(func(u *unstructured.Unstructured) { u.Object["report"] = map[string]any{"summary": "x"} }),
	} {
		if reportCurrent(u, r, node.UID) {
			t.Errorf("%s: taken as current", name)
		}
	}
	if reportCurrent(obj, r, types.UID("uid-2")) {
		t.Error("owned by a node of the same name but another UID: taken as current")
	}
	// ObservedAt alone does not make a report stale.
	later := r
	later.ObservedAt = metav1.NewTime(r.ObservedAt.Add(time.Hour))
	if !reportCurrent(obj, later, node.UID) {
		t.Error("a newer ObservedAt makes the report stale")
	}
	var back v1alpha1.NodeReport
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &back); err != nil || back.OwnerReferences[0].Kind != "Node" {
		t.Errorf("round trip: %v %+v", err, back.OwnerReferences)
	}
}
