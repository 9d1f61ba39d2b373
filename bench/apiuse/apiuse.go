// Package apiuse reads what clients asked of a kube-apiserver from its own
// /metrics, for the cluster benches (bench/cluster.sh): requests and bytes
// per verb and resource, taken as the difference of two snapshots.
package apiuse

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Use is what clients asked of the API server, summed from its own
// metrics: requests and response bytes per "VERB resource", and the bytes
// of watch events streamed per kind.
type Use struct {
	// Requests counts apiserver_request_total per "VERB resource".
	Requests map[string]float64
	// ResponseBytes sums apiserver_response_sizes per "VERB resource"
	// (the API server records it for reads: GET, LIST and WATCH lists).
	ResponseBytes map[string]float64
	// WatchBytes sums apiserver_watch_events_sizes per kind.
	WatchBytes map[string]float64
}

// Read reads the API server's /metrics as cfg (which may read them).
func Read(ctx context.Context, cfg *rest.Config) (Use, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Use{}, fmt.Errorf("client for /metrics: %w", err)
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return Use{}, fmt.Errorf("reading /metrics: %w", err)
	}
	return Parse(raw)
}

// Parse sums the request, response size and watch event size
// series of a Prometheus text exposition.
func Parse(raw []byte) (Use, error) {
	u := Use{Requests: map[string]float64{}, ResponseBytes: map[string]float64{}, WatchBytes: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		l := sc.Text()
		var into map[string]float64
		var keyOf func(map[string]string) string
		switch {
		case strings.HasPrefix(l, "apiserver_request_total{"):
			into, keyOf = u.Requests, verbResource
		case strings.HasPrefix(l, "apiserver_response_sizes_sum{"):
			into, keyOf = u.ResponseBytes, verbResource
		case strings.HasPrefix(l, "apiserver_watch_events_sizes_sum{"):
			into, keyOf = u.WatchBytes, func(m map[string]string) string { return m["kind"] }
		default:
			continue
		}
		open, end := strings.IndexByte(l, '{'), strings.LastIndexByte(l, '}')
		if end < open {
			return Use{}, fmt.Errorf("metrics line %d: no closing brace: %q", line, l)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(l[end+1:]), 64)
		if err != nil {
			return Use{}, fmt.Errorf("metrics line %d: value: %w", line, err)
		}
		into[keyOf(labels(l[open+1:end]))] += v
	}
	if err := sc.Err(); err != nil {
		return Use{}, fmt.Errorf("reading metrics: %w", err)
	}
	return u, nil
}

func verbResource(m map[string]string) string {
	r := m["resource"]
	if r == "" {
		// A non-resource path, such as /openapi/v3 (labelled
		// subresource="openapi/v3").
		return m["verb"] + " /" + strings.TrimPrefix(m["subresource"], "/")
	}
	if m["subresource"] != "" {
		r += "/" + m["subresource"]
	}
	return m["verb"] + " " + r
}

// labels splits name="value",... (values hold no escaped quotes in the
// series read here).
func labels(s string) map[string]string {
	m := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, "=\"")
		if !ok {
			break
		}
		v, after, _ := strings.Cut(rest, "\"")
		m[k] = v
		s = strings.TrimPrefix(after, ",")
	}
	return m
}

// Sub is u minus an earlier snapshot.
func (u Use) Sub(before Use) Use {
	sub := func(a, b map[string]float64) map[string]float64 {
		d := map[string]float64{}
		for k, v := range a {
			if x := v - b[k]; x != 0 {
				d[k] = x
			}
		}
		return d
	}
	return Use{Requests: sub(u.Requests, before.Requests), ResponseBytes: sub(u.ResponseBytes, before.ResponseBytes), WatchBytes: sub(u.WatchBytes, before.WatchBytes)}
}

// Without drops the series of the given resources (e.g. the API
// server's own leases and endpoints) and of non-resource paths
// (/openapi/v3, which the API server's own aggregator reads) from u.
func (u Use) Without(resources ...string) Use {
	drop := func(m map[string]float64) map[string]float64 {
		d := map[string]float64{}
		for k, v := range m {
			_, r, _ := strings.Cut(k, " ")
			if !containsString(resources, r) && !strings.HasPrefix(r, "/") {
				d[k] = v
			}
		}
		return d
	}
	return Use{Requests: drop(u.Requests), ResponseBytes: drop(u.ResponseBytes), WatchBytes: u.WatchBytes}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Total sums a series.
func Total(m map[string]float64) float64 {
	var t float64
	for _, v := range m {
		t += v
	}
	return t
}

// Only keeps the series of the given resources (where another client,
// such as kube-controller-manager, shares the API server).
func (u Use) Only(resources ...string) Use {
	keep := func(m map[string]float64) map[string]float64 {
		d := map[string]float64{}
		for k, v := range m {
			_, r, _ := strings.Cut(k, " ")
			r, _, _ = strings.Cut(r, "/")
			if containsString(resources, r) {
				d[k] = v
			}
		}
		return d
	}
	return Use{Requests: keep(u.Requests), ResponseBytes: keep(u.ResponseBytes), WatchBytes: map[string]float64{}}
}
