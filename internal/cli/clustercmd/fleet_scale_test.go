package clustercmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/agent"
	"berth.dev/berth/internal/cluster/fleet"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/evaluate/preflight"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testhosts"
)

// fleetReports is how many NodeReports fleetScale creates; bench/cluster.sh
// runs it with -fleet-reports=5000 and records the BENCH line (the wall
// time is a benchmark's number, never asserted here; memory is).
var fleetReports = flag.Int("fleet-reports", 300, "NodeReports created for the berth fleet scale measurement")

// fleetScale creates n NodeReports directly (fixture reports round robin
// under generated node names) and measures `berth fleet` over them with
// /usr/bin/time -v: wall time and peak RSS.
func fleetScale(t *testing.T, bin, kubeconfig string, dyn dynamic.Interface, n int) {
	t.Helper()
	var results []preflight.Result
	for _, name := range testhosts.Names(t) {
		root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", name))
		if err != nil {
			t.Fatal(err)
		}
		r, err := agent.Evaluator(root, discover.Options{}, nil)(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	ctx := context.Background()
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := fmt.Sprintf("scale-%05d", i)
				r := results[i%len(results)]
				nr := v1alpha1.NodeReport{Report: nodereport.Build(name, "v0.0.0-test", r.Facts, r.Verdicts, time.Now())}
				nr.APIVersion, nr.Kind, nr.Name = v1alpha1.SchemeGroupVersion.String(), v1alpha1.Kind, name
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&nr)
				if err == nil {
					u := &unstructured.Unstructured{Object: m}
					unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
					_, err = dyn.Resource(v1alpha1.GroupVersionResource).Create(ctx, u, metav1.CreateOptions{})
				}
				if err != nil {
					mu.Lock()
					firstErr = fmt.Errorf("creating %s: %w", name, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	t.Logf("created %d NodeReports in %s", n, time.Since(start).Round(time.Millisecond))

	// Three runs on a machine shared with other work: the median counts.
	var walls []time.Duration
	var kib int
	for range 3 {
		cmd := exec.Command("/usr/bin/time", "-v", bin, "fleet", "--kubeconfig", kubeconfig)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("berth fleet: %v\n%s", err, stderr.String())
		}
		walls = append(walls, parseElapsed(t, stderr.String()))
		rss := regexp.MustCompile(`Maximum resident set size \(kbytes\): (\d+)`).FindStringSubmatch(stderr.String())
		if rss == nil {
			t.Fatalf("no RSS in /usr/bin/time output:\n%s", stderr.String())
		}
		k, _ := strconv.Atoi(rss[1])
		kib = max(kib, k)
		if !strings.Contains(stdout.String(), "scale-00000") {
			t.Errorf("fleet output does not list the reports:\n%.2000s", stdout.String())
		}
	}
	slices.Sort(walls)
	wall := walls[1]
	floor, bytes := listFloor(t, kubeconfig)
	t.Logf("berth fleet over %d reports: %v wall (median %s), max RSS %d KiB; bare paged LIST %s for %d bytes", n, walls, wall, kib, floor, bytes)
	fmt.Printf("BENCH fleet_reports=%d fleet_wall=%s fleet_max_rss_mib=%.1f list_floor=%s list_bytes=%d\n", n, wall, float64(kib)/1024, floor, bytes)
	if n >= 5000 {
		if kib > 300<<10 {
			t.Errorf("berth fleet over %d reports peaked at %d KiB RSS, want under 300 MiB", n, kib)
		}
	}
}

// listFloor is the physical bound of berth fleet on this API server: the
// same paged LIST fleet makes (same page size, uncompressed JSON), with
// the bytes read and dropped, no decoding and no analysis. The median of
// three runs, and the bytes of one.
func listFloor(t *testing.T, kubeconfig string) (time.Duration, int) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	c, err := fleet.RESTClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := v1alpha1.GroupVersionResource
	var runs []time.Duration
	total := 0
	for range 3 {
		start, cont := time.Now(), ""
		total = 0
		for {
			req := c.Get().AbsPath("/apis", gvr.Group, gvr.Version, gvr.Resource).Param("limit", strconv.Itoa(fleet.DefaultPageSize))
			if cont != "" {
				req = req.Param("continue", cont)
			}
			raw, err := req.Do(context.Background()).Raw()
			if err != nil {
				t.Fatalf("bare LIST: %v", err)
			}
			total += len(raw)
			var p struct {
				Metadata metav1.ListMeta `json:"metadata"`
			}
			// Only the continue token: json skips the items unparsed.
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatalf("bare LIST page: %v", err)
			}
			if cont = p.Metadata.Continue; cont == "" {
				break
			}
		}
		runs = append(runs, time.Since(start))
	}
	slices.Sort(runs)
	return runs[1], total
}

// parseElapsed reads GNU time's "Elapsed (wall clock) time (h:mm:ss or
// m:ss): 0:01.23".
func parseElapsed(t *testing.T, out string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):(\d+(?:\.\d+)?)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no elapsed time in /usr/bin/time output:\n%s", out)
	}
	h := 0
	if m[1] != "" {
		h, _ = strconv.Atoi(m[1])
	}
	mins, _ := strconv.Atoi(m[2])
	secs, _ := strconv.ParseFloat(m[3], 64)
	return time.Duration(h)*time.Hour + time.Duration(mins)*time.Minute + time.Duration(secs*float64(time.Second))
}
