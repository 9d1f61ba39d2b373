// Command benchcluster measures, against a real kube-apiserver and etcd
// (KUBEBUILDER_ASSETS, from .ci/tools.env), what bench/cluster.sh reports
// besides the agent and fleet numbers:
//
//	go run ./bench/cmd/benchcluster rollout -nodes 1000 -restart 150ms -slots 1,10,50
//	go run ./bench/cmd/benchcluster nfd -master BIN -worker BIN -crds FILE -workers 20
//
// rollout runs the node-installer's real restart Lease (package
// nodeinstall) for N simulated nodes that all start at once, as a
// DaemonSet's first rollout does, each holding the lock for one simulated
// restart, and prints the wall time against the bound N x restart / K.
//
// nfd runs NFD's own nfd-master and W nfd-worker processes (one per
// simulated Node, NodeFeature API) on a compressed timeline and prints the
// API requests and bytes per node per hour that they make, from the API
// server's metrics.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/bench/apiuse"
	"berth.dev/berth/internal/cluster/nodeinstall"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: benchcluster rollout|nfd [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "rollout":
		err = rollout(os.Args[2:])
	case "nfd":
		err = nfd(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "benchcluster: unknown mode %q: expected rollout or nfd\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchcluster: %v\n", err)
		os.Exit(1)
	}
}

// apiServer is a kube-apiserver and etcd from KUBEBUILDER_ASSETS, with
// an administrator's config and kubeconfig file.
type apiServer struct {
	env        *envtest.Environment
	admin      *rest.Config
	kubeconfig string
	dir        string
}

func startAPIServer() (*apiServer, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: source .ci/tools.env (built by .ci/tools.sh)")
	}
	dir, err := os.MkdirTemp("", "benchcluster-")
	if err != nil {
		return nil, err
	}
	e := &envtest.Environment{BinaryAssetsDirectory: os.Getenv("KUBEBUILDER_ASSETS")}
	if _, err := e.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	s := &apiServer{env: e, dir: dir}
	user, err := e.AddUser(envtest.User{Name: "bench-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("adding the admin user: %w", err)
	}
	s.admin = user.Config()
	kc, err := user.KubeConfig()
	if err != nil {
		s.stop()
		return nil, err
	}
	s.kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := os.WriteFile(s.kubeconfig, kc, 0o600); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *apiServer) stop() {
	_ = s.env.Stop()
	os.RemoveAll(s.dir)
}

// fast is the admin config without client-side throttling: one client
// stands in for many nodes, each of which would have its own.
func (s *apiServer) fast() *rest.Config {
	cfg := rest.CopyConfig(s.admin)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

func rollout(args []string) error {
	fs := flag.NewFlagSet("rollout", flag.ExitOnError)
	nodes := fs.Int("nodes", 1000, "simulated nodes, all starting at once")
	restart := fs.Duration("restart", 150*time.Millisecond, "simulated restart: how long each node holds the lock")
	poll := fs.Duration("poll", 2*time.Second, "how often a waiter retries: the node-installer's 2 s, not scaled down with the restart, since N waiters polling every P make N/P requests a second and this API server is the shared machine's")
	slotList := fs.String("slots", "1,10,50", "maxConcurrentRestarts values to run, comma-separated")
	_ = fs.Parse(args)
	var slots []int
	for _, s := range strings.Split(*slotList, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || k < 1 {
			return fmt.Errorf("-slots %q: expected positive integers", *slotList)
		}
		slots = append(slots, k)
	}
	env, err := startAPIServer()
	if err != nil {
		return err
	}
	defer env.stop()
	dyn, err := dynamic.NewForConfig(env.fast())
	if err != nil {
		return err
	}
	ctx := context.Background()
	for _, k := range slots {
		name := fmt.Sprintf("rollout-k%d", k)
		var mu sync.Mutex
		inside, most := 0, 0
		var wg sync.WaitGroup
		errs := make(chan error, *nodes)
		before, err := apiuse.Read(ctx, env.admin)
		if err != nil {
			return err
		}
		start := time.Now()
		for i := range *nodes {
			l := &nodeinstall.RestartLease{Client: dyn, Namespace: "default", Name: name, Holder: fmt.Sprintf("node-%04d", i),
				Slots: k, Poll: *poll, Duration: time.Minute}
			wg.Add(1)
			go func() {
				defer wg.Done()
				rel, err := l.Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				inside++
				most = max(most, inside)
				mu.Unlock()
				time.Sleep(*restart)
				mu.Lock()
				inside--
				mu.Unlock()
				rel()
			}()
		}
		wg.Wait()
		wall := time.Since(start)
		close(errs)
		for err := range errs {
			return err
		}
		after, err := apiuse.Read(ctx, env.admin)
		if err != nil {
			return err
		}
		d := after.Sub(before)
		bound := time.Duration(*nodes) * *restart / time.Duration(k)
		fmt.Printf("BENCH rollout nodes=%d restart=%s poll=%s slots=%d wall=%s bound=%s ratio=%.3f max_holders=%d lease_requests=%.0f lease_requests_per_node=%.1f\n",
			*nodes, *restart, *poll, k, wall.Round(time.Millisecond), bound, float64(wall)/float64(bound), most,
			apiuse.Total(d.Requests), apiuse.Total(d.Requests)/float64(*nodes))
		if most > k {
			return fmt.Errorf("slots=%d: %d holders at once", k, most)
		}
	}
	return nil
}

func nfd(args []string) error {
	fs := flag.NewFlagSet("nfd", flag.ExitOnError)
	master := fs.String("master", "", "nfd-master binary")
	worker := fs.String("worker", "", "nfd-worker binary")
	crds := fs.String("crds", "", "NFD's CRDs (deployment/base/nfd-crds/nfd-api-crds.yaml of the same version)")
	workers := fs.Int("workers", 20, "nfd-worker processes, one simulated Node each")
	interval := fs.Duration("interval", 6*time.Second, "the workers' core.sleepInterval (NFD's default is 60 s)")
	window := fs.Duration("window", 60*time.Second, "measured window, after every worker published once")
	_ = fs.Parse(args)
	if *master == "" || *worker == "" || *crds == "" {
		return fmt.Errorf("-master, -worker and -crds are required")
	}
	env, err := startAPIServer()
	if err != nil {
		return err
	}
	defer env.stop()
	ctx := context.Background()
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if out, err := exec.Command(kubectl, "--kubeconfig", env.kubeconfig, "apply", "--server-side", "-f", *crds).CombinedOutput(); err != nil {
		return fmt.Errorf("applying %s: %v: %s", *crds, err, out)
	}
	cs, err := kubernetes.NewForConfig(env.admin)
	if err != nil {
		return err
	}
	// nfd-master records itself on its own Node (a control-plane node in
	// a real cluster), which is not one of the measured nodes.
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nfd-master"}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating node nfd-master: %w", err)
	}
	names := make([]string, *workers)
	for i := range names {
		names[i] = fmt.Sprintf("nfd-sim-%03d", i)
		// Labels, annotations and capacity as a kubelet registers them:
		// the master's JSON patches add to those maps.
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: names[i],
			Labels:      map[string]string{"kubernetes.io/hostname": names[i]},
			Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}}}
		created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("creating node %s: %w", names[i], err)
		}
		created.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")}
		created.Status.Allocatable = created.Status.Capacity
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", names[i], err)
		}
	}
	logDir, err := os.MkdirTemp("", "benchcluster-nfd-")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if ok {
			os.RemoveAll(logDir)
		}
	}()
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	start := func(name, bin string, env []string, args ...string) error {
		f, err := os.Create(filepath.Join(logDir, name+".log"))
		if err != nil {
			return err
		}
		c := exec.Command(bin, args...)
		c.Stdout, c.Stderr = f, f
		c.Env = append(os.Environ(), env...)
		if err := c.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", name, err)
		}
		procs = append(procs, c)
		return nil
	}
	// Ports: NFD serves metrics and health on -port; the base is far
	// from the ports the suite and other benches use.
	if err := start("nfd-master", *master, []string{"NODE_NAME=nfd-master", "KUBERNETES_NAMESPACE=default"},
		"-kubeconfig", env.kubeconfig, "-port", "39080"); err != nil {
		return err
	}
	opts := fmt.Sprintf(`{"core":{"sleepInterval":%q}}`, interval.String())
	for i, n := range names {
		if err := start(n, *worker, []string{"NODE_NAME=" + n, "KUBERNETES_NAMESPACE=default"},
			"-kubeconfig", env.kubeconfig, "-no-owner-refs", "-port", strconv.Itoa(39100+i), "-options", opts); err != nil {
			return err
		}
	}
	// Settle: every Node labelled by the master from its worker's
	// NodeFeature, then one more interval.
	deadline := time.Now().Add(time.Minute)
	labels := 0
	for {
		done := 0
		labels = 0
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range list.Items {
			if n.Name == "nfd-master" {
				continue
			}
			c := 0
			for k := range n.Labels {
				if strings.HasPrefix(k, "feature.node.kubernetes.io/") {
					c++
				}
			}
			if c > 0 {
				done++
				labels = c
			}
		}
		if done == len(names) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after a minute only %d of %d nodes have NFD labels (logs in %s)", done, len(names), logDir)
		}
		time.Sleep(time.Second)
	}
	time.Sleep(*interval)
	before, err := apiuse.Read(ctx, env.admin)
	if err != nil {
		return err
	}
	time.Sleep(*window)
	after, err := apiuse.Read(ctx, env.admin)
	if err != nil {
		return err
	}
	// The API server's own Leases (apiserver identity), endpoints (the
	// kubernetes Service) and OpenAPI reads are not NFD's.
	d := after.Sub(before).Without("leases", "endpoints", "endpointslices")
	cycles := float64(*window) / float64(*interval)
	perHour := 3600 / 60.0 // NFD's default sleepInterval: 60 s
	perNodeCycle := func(v float64) float64 { return v / float64(*workers) / cycles }
	var keys []string
	for k := range d.Requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("BENCH nfd request %q per_node_per_cycle=%.3f response_bytes_per_node_per_cycle=%.0f\n", k, perNodeCycle(d.Requests[k]), perNodeCycle(d.ResponseBytes[k]))
	}
	fmt.Printf("BENCH nfd workers=%d interval=%s window=%s labels_per_node=%d requests_per_node_per_hour=%.1f response_bytes_per_node_per_hour=%.0f watch_bytes_per_node_per_hour=%.0f (at the default 60 s interval)\n",
		*workers, interval, window, labels, perNodeCycle(apiuse.Total(d.Requests))*perHour,
		perNodeCycle(apiuse.Total(d.ResponseBytes))*perHour, perNodeCycle(apiuse.Total(d.WatchBytes))*perHour)
	return nil
}
