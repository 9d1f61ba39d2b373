package apiuse

import (
	"maps"
	"strings"
	"testing"
)

// The series as kube-apiserver v1.37 exposes them (trimmed to the
// labels read; real lines carry more).
const exposition = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 7
apiserver_request_total{code="404",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="openapi/v3",verb="GET",version=""} 4
apiserver_response_sizes_sum{component="apiserver",group="",resource="nodes",scope="resource",subresource="",verb="GET",version="v1"} 4096
apiserver_watch_events_sizes_sum{group="",kind="Node",version="v1"} 512
`

func TestParseSubOnly(t *testing.T) {
	u, err := Parse([]byte(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"GET nodes": 8, "PATCH nodes/status": 2, "GET /openapi/v3": 4}
	if !maps.Equal(u.Requests, want) {
		t.Errorf("requests %v, want %v", u.Requests, want)
	}
	if u.ResponseBytes["GET nodes"] != 4096 || u.WatchBytes["Node"] != 512 {
		t.Errorf("bytes %v, watch %v", u.ResponseBytes, u.WatchBytes)
	}
	later, _ := Parse([]byte(strings.Replace(exposition, "} 7", "} 10", 1)))
	if d := later.Sub(u); !maps.Equal(d.Requests, map[string]float64{"GET nodes": 3}) {
		t.Errorf("difference %v, want 3 GET nodes", d.Requests)
	}
	if got := u.Without("leases").Requests; len(got) != 2 || got["GET /openapi/v3"] != 0 {
		t.Errorf("without non-resource paths: %v", got)
	}
	if got := u.Only("nodes").Requests; len(got) != 2 || got["PATCH nodes/status"] != 2 {
		t.Errorf("only nodes (with subresources): %v", got)
	}
	if _, err := Parse([]byte("apiserver_request_total{verb=\"GET\"} many\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a bad value: %v, want an error naming line 1", err)
	}
}
