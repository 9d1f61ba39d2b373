package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
)

// TestListPagesAndMalformed serves NodeReports in pages of the requested
// size with continue tokens, some of them malformed: every page is read,
// the malformed reports are listed by name and the rest analysed.
func TestListPagesAndMalformed(t *testing.T) {
	var items []*unstructured.Unstructured
	for i := range 7 {
		items = append(items, fixtureObject(t, "snp-genoa-k3s-ready", fmt.Sprintf("n%d", i)))
	}
	noReport := fixtureObject(t, "snp-genoa-k3s-ready", "bad-1")
	delete(noReport.Object, "report")
	mistyped := fixtureObject(t, "snp-genoa-k3s-ready", "bad-2")
	mistyped.Object["report"].(map[string]any)["platforms"] = "all of them"
	oldVersion := fixtureObject(t, "snp-genoa-k3s-ready", "bad-3")
	oldVersion.SetAPIVersion("berth.dev/v1alpha0")
	items = append(items[:3], append([]*unstructured.Unstructured{noReport, mistyped, oldVersion}, items[3:]...)...)

	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		if r.URL.Path != "/apis/berth.dev/v1alpha1/nodereports" {
			http.NotFound(w, r)
			return
		}
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		from, _ := strconv.Atoi(r.URL.Query().Get("continue"))
		to := min(from+limit, len(items))
		page := map[string]any{"apiVersion": "berth.dev/v1alpha1", "kind": "NodeReportList", "metadata": map[string]any{}}
		if to < len(items) {
			page["metadata"] = map[string]any{"continue": strconv.Itoa(to)}
		}
		var objs []any
		for _, u := range items[from:to] {
			objs = append(objs, u.Object)
		}
		page["items"] = objs
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	}))
	defer srv.Close()
	c, err := RESTClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	nodes, bad, err := List(context.Background(), c, 4)
	if err != nil {
		t.Fatal(err)
	}
	if requests != 3 {
		t.Errorf("%d list requests for 10 reports in pages of 4, want 3", requests)
	}
	if len(nodes) != 7 || len(bad) != 3 {
		t.Fatalf("%d nodes, malformed %+v", len(nodes), bad)
	}
	a := Analyze(nodes, bad)
	for i, want := range []string{"bad-1", "bad-2", "bad-3"} {
		if a.Malformed[i].Name != want {
			t.Errorf("malformed[%d] = %+v, want %s", i, a.Malformed[i], want)
		}
	}
	if len(a.Groups) != 1 || len(a.Groups[0].Nodes) != 7 {
		t.Errorf("groups %+v", a.Groups)
	}

	// An API error fails the listing with the resource named.
	c, _ = RESTClient(&rest.Config{Host: srv.URL + "/nowhere"})
	if _, _, err := List(context.Background(), c, 4); err == nil {
		t.Error("no error for a missing resource")
	}
}

// BenchmarkDecodePage500 decodes one list page of 500 typical reports, as
// berth fleet does for every page.
func BenchmarkDecodePage500(b *testing.B) {
	hosts := []string{"snp-genoa-k3s-ready", "tdx-emr-kubeadm-ready", "gpu-h100-vfio-isolated", "snp-old-firmware"}
	var objs []json.RawMessage
	for i := range 500 {
		raw, err := fixtureObject(b, hosts[i%len(hosts)], fmt.Sprintf("n%d", i)).MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		objs = append(objs, raw)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, o := range objs {
			if _, err := Decode(o); err != nil {
				b.Fatal(err)
			}
		}
	}
}
