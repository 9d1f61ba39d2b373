package agent

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/bench/apiuse"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/evaluate/preflight"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testenv"
)

// agents is the size of the simulated fleet in TestFleetPublishAndQuiet;
// bench/cluster.sh runs it with -agents=500.
var agents = flag.Int("agents", 20, "simulated agents in TestFleetPublishAndQuiet")

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testenv.Main(m, testenv.Options{ControllerManager: true}, &env))
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixtureHosts lists testdata/hosts.
func fixtureHosts(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("..", "..", "..", "testdata", "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// evaluated caches one evaluation per fixture host: the simulated agents
// measure the API side, discovery has its own benchmarks.
type evaluated struct {
	mu  sync.Mutex
	res map[string]preflight.Result
}

func (e *evaluated) get(t testing.TB, host string) preflight.Result {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.res[host]; ok {
		return r
	}
	root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", host))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Evaluator(root, discover.Options{Now: func() time.Time { return epoch }}, nil)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if e.res == nil {
		e.res = map[string]preflight.Result{}
	}
	e.res[host] = r
	return r
}

var fixtures evaluated

// sim is one simulated agent with its own client and request counters.
type sim struct {
	node          string
	a             *Agent
	reads, writes atomic.Int64
	result        atomic.Pointer[preflight.Result]
	metrics       *Metrics
}

func newSim(t testing.TB, cfg *rest.Config, node, host string, tune func(*Config)) *sim {
	t.Helper()
	s := &sim{node: node, metrics: NewMetrics()}
	r := fixtures.get(t, host)
	s.result.Store(&r)
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20, 40
	CountRequests(cfg, func(method string) {
		if method == "GET" {
			s.reads.Add(1)
		} else {
			s.writes.Add(1)
		}
	})
	c := Config{
		NodeName: node, Version: "v0.0.0-test",
		Evaluate: func(context.Context) (preflight.Result, error) { return *s.result.Load(), nil },
		Now:      func() time.Time { return epoch },
		Metrics:  s.metrics,
		Log:      slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if tune != nil {
		tune(&c)
	}
	var err error
	s.a, err = New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testWriter sends the agent's warnings to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (s *sim) use(t testing.TB, host string) {
	r := fixtures.get(t, host)
	s.result.Store(&r)
}

func createNodes(t testing.TB, cs kubernetes.Interface, names []string) {
	t.Helper()
	ctx := context.Background()
	for _, n := range names {
		_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: n, Labels: map[string]string{"kubernetes.io/hostname": n, "team": "infra"},
		}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating node %s: %v", n, err)
		}
	}
}

func admin(t testing.TB) (*kubernetes.Clientset, dynamic.Interface) {
	t.Helper()
	cs := testenv.Clientset(t, env.Admin)
	dyn, err := dynamic.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return cs, dyn
}

func getReport(t testing.TB, dyn dynamic.Interface, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(v1alpha1.GroupVersionResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading NodeReport %s: %v", name, err)
	}
	return u
}

// berthLabels are the node's berth.dev/ labels.
func berthLabels(n *corev1.Node) map[string]string {
	out := map[string]string{}
	for k, v := range n.Labels {
		if strings.HasPrefix(k, v1alpha1.LabelPrefix) {
			out[k] = v
		}
	}
	return out
}

// parallel runs f for every sim with at most 64 at a time.
func parallel(sims []*sim, f func(*sim) error) error {
	sem := make(chan struct{}, 64)
	errs := make(chan error, len(sims))
	var wg sync.WaitGroup
	for _, s := range sims {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(s); err != nil {
				errs <- fmt.Errorf("%s: %w", s.node, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestFleetPublishAndQuiet runs a fleet of simulated agents (fixture hosts
// round robin) against one API server: all publish, then a quiet cycle must
// write nothing. It reports the publish time, requests per agent per quiet
// interval and the NodeReport sizes (BENCH lines, read by bench/cluster.sh).
func TestFleetPublishAndQuiet(t *testing.T) {
	testenv.Need(t)
	n := *agents
	cs, dyn := admin(t)
	hosts := fixtureHosts(t)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("sim-%04d", i)
	}
	createNodes(t, cs, names)
	sims := make([]*sim, n)
	for i, name := range names {
		sims[i] = newSim(t, env.Admin, name, hosts[i%len(hosts)], nil)
	}
	ctx := context.Background()

	start := time.Now()
	if err := parallel(sims, func(s *sim) error { return s.a.Cycle(ctx) }); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	publish := time.Since(start)
	var firstWrites int64
	for _, s := range sims {
		firstWrites += s.writes.Load()
		s.reads.Store(0)
		s.writes.Store(0)
	}

	// The API server's own count of the quiet cycle: requests and bytes
	// on the agent's resources (kube-controller-manager shares it).
	before, err := apiuse.Read(ctx, env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := parallel(sims, func(s *sim) error { return s.a.Cycle(ctx) }); err != nil {
		t.Fatalf("quiet cycle: %v", err)
	}
	quiet := time.Since(start)
	after, err := apiuse.Read(ctx, env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	server := after.Sub(before).Only("nodes", "nodereports")
	var reads, writes int64
	for _, s := range sims {
		reads += s.reads.Load()
		writes += s.writes.Load()
		if w := s.writes.Load(); w != 0 {
			t.Errorf("%s: %d writes in a quiet interval, want 0", s.node, w)
		}
	}

	// Sizes: the report content, and the stored object with metadata and
	// managedFields as a LIST returns it.
	var maxReport, maxObject, sumObject int
	biggest := ""
	for _, name := range names {
		u := getReport(t, dyn, name)
		whole, _ := json.Marshal(u.Object)
		rep, _ := json.Marshal(u.Object["report"])
		if len(rep) > maxReport {
			maxReport, biggest = len(rep), name
		}
		maxObject = max(maxObject, len(whole))
		sumObject += len(whole)
		if len(u.GetOwnerReferences()) != 1 || u.GetOwnerReferences()[0].Kind != "Node" {
			t.Errorf("%s: owner references %+v", name, u.GetOwnerReferences())
		}
	}
	if maxReport > 8<<10 {
		t.Errorf("largest report content %d bytes (%s), want under 8 KiB", maxReport, biggest)
	}
	// Labels: every node carries the TEE and KVM labels and its platforms.
	for _, name := range names[:min(n, 20)] {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := berthLabels(node)
		if l[nodereport.TEELabel] == "" || l[nodereport.KVMLabel] == "" || len(l) < 3 || node.Labels["team"] != "infra" {
			t.Errorf("%s: labels %v", name, node.Labels)
		}
	}
	fmt.Printf("BENCH agents=%d publish_all=%s first_cycle_writes_per_agent=%.2f quiet_cycle=%s quiet_reads_per_agent=%.2f quiet_writes_per_agent=%.2f report_max_bytes=%d object_max_bytes=%d object_avg_bytes=%d\n",
		n, publish.Round(time.Millisecond), float64(firstWrites)/float64(n), quiet.Round(time.Millisecond),
		float64(reads)/float64(n), float64(writes)/float64(n), maxReport, maxObject, sumObject/n)
	// Per hour at the agent's default 10-minute interval: six quiet
	// cycles.
	req, bytes := apiuse.Total(server.Requests), apiuse.Total(server.ResponseBytes)
	if req < float64(reads+writes) {
		t.Errorf("the API server counted %.0f requests on nodes and nodereports in the quiet cycle, the agents' clients %d", req, reads+writes)
	}
	fmt.Printf("BENCH agents=%d server_requests_per_agent_per_quiet_cycle=%.2f response_bytes_per_agent_per_quiet_cycle=%.0f requests_per_node_per_hour=%.1f response_bytes_per_node_per_hour=%.0f (6 quiet cycles, the default 10 min interval) series=%v\n",
		n, req/float64(n), bytes/float64(n), 6*req/float64(n), 6*bytes/float64(n), server.Requests)
}

// TestHandEditsRestored: a NodeReport or labels edited by hand are
// restored on the next cycle, with one write each; foreign labels stay.
func TestHandEditsRestored(t *testing.T) {
	testenv.Need(t)
	cs, dyn := admin(t)
	createNodes(t, cs, []string{"edit-1"})
	s := newSim(t, env.Admin, "edit-1", "snp-genoa-k3s-ready", nil)
	ctx := context.Background()
	if err := s.a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	want := getReport(t, dyn, "edit-1")
	wantHash, _, _ := unstructured.NestedString(want.Object, "report", "contentHash")

	// Edit the report, keeping its hash.
	u := want.DeepCopy()
	if err := unstructured.SetNestedField(u.Object, "6.1.0-hand-edited", "report", "facts", "kernelRelease"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(v1alpha1.GroupVersionResource).Update(ctx, u, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	s.writes.Store(0)
	if err := s.a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	got := getReport(t, dyn, "edit-1")
	if k, _, _ := unstructured.NestedString(got.Object, "report", "facts", "kernelRelease"); k == "6.1.0-hand-edited" {
		t.Error("the hand-edited report was not restored")
	}
	if h, _, _ := unstructured.NestedString(got.Object, "report", "contentHash"); h != wantHash {
		t.Errorf("hash %s after restoring, want %s", h, wantHash)
	}
	if w := s.writes.Load(); w != 1 {
		t.Errorf("%d writes to restore the report, want 1", w)
	}

	// Edit the labels: change one, delete one, add a foreign berth.dev/ one.
	node, err := cs.CoreV1().Nodes().Get(ctx, "edit-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := berthLabels(node)
	node.Labels[nodereport.TEELabel] = "bogus"
	var platformLabel string
	for k := range before {
		if strings.HasPrefix(k, nodereport.PlatformLabelPrefix) {
			platformLabel = k
			break
		}
	}
	delete(node.Labels, platformLabel)
	node.Labels[nodereport.PlatformLabelPrefix+"set-by-hand"] = "true"
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{FieldManager: "kubectl-label"}); err != nil {
		t.Fatal(err)
	}
	s.writes.Store(0)
	if err := s.a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	node, err = cs.CoreV1().Nodes().Get(ctx, "edit-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after := berthLabels(node)
	if after[nodereport.PlatformLabelPrefix+"set-by-hand"] != "true" {
		t.Error("a label the agent does not own was removed")
	}
	delete(after, nodereport.PlatformLabelPrefix+"set-by-hand")
	if !maps.Equal(before, after) {
		t.Errorf("labels not restored:\nbefore %v\nafter  %v", before, after)
	}
	if w := s.writes.Load(); w != 1 {
		t.Errorf("%d writes to restore the labels, want 1", w)
	}
	// And quiet again, despite the foreign label.
	s.writes.Store(0)
	if err := s.a.Cycle(ctx); err != nil || s.writes.Load() != 0 {
		t.Errorf("cycle after restoring: err %v, %d writes", err, s.writes.Load())
	}

	// A platform dropped from the evaluation loses its label.
	s.use(t, "cloud-vm-no-nested")
	if err := s.a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	node, _ = cs.CoreV1().Nodes().Get(ctx, "edit-1", metav1.GetOptions{})
	for k := range berthLabels(node) {
		if strings.Contains(k, "k3s-") {
			t.Errorf("stale label %s kept after the node became another host", k)
		}
	}
}

// TestNodeDeletedCollectsReport: the NodeReport is owned by its Node, so
// kube-controller-manager's garbage collector deletes it with the node.
func TestNodeDeletedCollectsReport(t *testing.T) {
	testenv.Need(t)
	cs, dyn := admin(t)
	createNodes(t, cs, []string{"gc-1"})
	s := newSim(t, env.Admin, "gc-1", "tdx-emr-kubeadm-ready", nil)
	ctx := context.Background()
	if err := s.a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	getReport(t, dyn, "gc-1")
	if err := cs.CoreV1().Nodes().Delete(ctx, "gc-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := dyn.Resource(v1alpha1.GroupVersionResource).Get(ctx, "gc-1", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("NodeReport gc-1 still there %s after its node was deleted: %v", time.Since(start), err)
	}
	t.Logf("NodeReport collected %s after the node was deleted", time.Since(start).Round(time.Millisecond))
}

// proxy forwards TCP to the API server and can be cut, to simulate an
// API server outage without stopping the shared control plane.
type proxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	p := &proxy{target: target, conns: map[net.Conn]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.ln = ln
	go p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

// cut closes the listener and every connection.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// restore listens again on the same address.
func (p *proxy) restore(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("re-listening on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go p.serve(ln)
}

// TestOutage cuts the agents off the API server for outage (a minute, as
// operators see during a control-plane upgrade; an hour-long outage behaves
// the same, the retry delay is capped), changes
// what they would publish meanwhile, and checks: no crash, no label lost
// or flapping (each node goes from the old label set to the new one exactly
// once), and catch-up within one backoff period after the server returns.
func TestOutage(t *testing.T) {
	testenv.Need(t)
	const outage = time.Minute
	const backoffMax = 3 * time.Second
	cs, dyn := admin(t)
	names := []string{"outage-1", "outage-2", "outage-3"}
	createNodes(t, cs, names)
	api, err := url.Parse(env.Admin.Host)
	if err != nil {
		t.Fatal(err)
	}
	px := startProxy(t, api.Host)
	cfg := rest.CopyConfig(env.Admin)
	cfg.Host = "https://" + px.addr
	cfg.Timeout = 5 * time.Second
	var sims []*sim
	for _, n := range names {
		sims = append(sims, newSim(t, cfg, n, "snp-genoa-k3s-ready", func(c *Config) {
			c.Interval = 2 * time.Second
			c.BackoffInitial = 250 * time.Millisecond
			c.BackoffMax = backoffMax
		}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	runErr := make(chan error, len(sims))
	for _, s := range sims {
		wg.Add(1)
		go func() { defer wg.Done(); runErr <- s.a.Run(ctx, nil) }()
	}
	defer func() { cancel(); wg.Wait() }()

	first := fixtures.get(t, "snp-genoa-k3s-ready")
	second := fixtures.get(t, "snp-old-firmware")
	hashOf := func(node string, r preflight.Result) string {
		return nodereport.Build(node, "v0.0.0-test", r.Facts, r.Verdicts, epoch).ContentHash
	}
	// Node names are part of the report: each node has its own hash.
	waitAll := func(r preflight.Result, within time.Duration) time.Duration {
		start := time.Now()
		for _, n := range names {
			want := hashOf(n, r)
			for {
				u, err := dyn.Resource(v1alpha1.GroupVersionResource).Get(context.Background(), n, metav1.GetOptions{})
				if err == nil {
					if h, _, _ := unstructured.NestedString(u.Object, "report", "contentHash"); h == want {
						break
					}
				}
				if time.Since(start) > within {
					t.Fatalf("%s: report not at %s after %s", n, want, within)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		return time.Since(start)
	}
	waitAll(first, 20*time.Second)

	// Watch the labels directly (not through the proxy) for flapping.
	type seen struct {
		mu   sync.Mutex
		sets map[string][]string // node -> distinct consecutive label sets
	}
	obs := &seen{sets: map[string][]string{}}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for watchCtx.Err() == nil {
			for _, n := range names {
				node, err := cs.CoreV1().Nodes().Get(watchCtx, n, metav1.GetOptions{})
				if err != nil {
					continue
				}
				keys := []string{}
				for k, v := range berthLabels(node) {
					keys = append(keys, k+"="+v)
				}
				sort.Strings(keys)
				key := strings.Join(keys, ",")
				obs.mu.Lock()
				if l := obs.sets[n]; len(l) == 0 || l[len(l)-1] != key {
					obs.sets[n] = append(l, key)
				}
				obs.mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	px.cut()
	for _, s := range sims {
		s.result.Store(&second)
	}
	time.Sleep(outage)
	errsBefore := 0.0
	for _, s := range sims {
		errsBefore += testutil.ToFloat64(s.metrics.PublishErrors)
	}
	if errsBefore == 0 {
		t.Error("no publish errors counted during the outage")
	}
	for _, s := range sims {
		if s.a.Ready() {
			t.Errorf("%s: ready during the outage", s.node)
		}
	}
	px.restore(t)
	caught := waitAll(second, backoffMax*12/10+2*time.Second)
	t.Logf("outage %s: %v publish errors; all agents caught up %s after the API server returned (backoff max %s)", outage, errsBefore, caught.Round(time.Millisecond), backoffMax)
	time.Sleep(500 * time.Millisecond)
	stopWatch()
	<-watchDone

	obs.mu.Lock()
	defer obs.mu.Unlock()
	for _, n := range names {
		if l := obs.sets[n]; len(l) > 2 || (len(l) > 0 && l[0] == "") {
			t.Errorf("%s: labels flapped or were lost: %d distinct sets %q", n, len(l), l)
		}
	}
	cancel()
	wg.Wait()
	close(runErr)
	for err := range runErr {
		if err != nil {
			t.Errorf("Run returned %v after cancel, want nil", err)
		}
	}
	for _, s := range sims {
		if !s.a.Ready() {
			t.Errorf("%s: not ready after catching up", s.node)
		}
	}
}
