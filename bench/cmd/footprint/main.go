// Command footprint runs `berth agent` and nfd-worker side by side against
// one real kube-apiserver (KUBEBUILDER_ASSETS) for many report intervals,
// first with nothing changing on the host and then with a fact changing
// every few intervals, and prints one Markdown table: resident memory, CPU
// seconds per interval and API requests per interval of each, with the
// ratios. bench/agent.sh builds both programs, gives this command a
// private mount namespace in which -os-release is bind-mounted over the
// host's /etc/os-release, and runs it:
//
//	footprint -berth berth-cluster -nfd nfd-worker -crd FILE -crd FILE -os-release FILE
//
// The changing fact is the host's OS version, as an upgrade changes it in
// os-release (VERSION_ID and PRETTY_NAME): both programs read it every
// interval (berth's report carries the OS name; NFD's system source
// publishes system.osrelease.VERSION_ID), so a change costs each of them
// one publication.
//
// API requests are counted from the API server's audit log (level
// Metadata), told apart by user agent, so that both programs are counted
// the same way by a third party and not by their own metrics.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// nodeName is the one Node both programs report on.
const nodeName = "bench-node"

// nfdNamespace holds nfd-worker's NodeFeature object.
const nfdNamespace = "nfd-bench"

// auditPolicy logs every request with its user agent and verb, once it
// completes: a watch is counted when it ends, like any other request.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
`

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// options are the command line.
type options struct {
	berth, nfd  string
	crds        stringList
	osRelease   string
	interval    time.Duration
	quiet       int
	changing    int
	changeEvery int
	warmup      int
	sampleEvery time.Duration
	as          string
}

// privileges returns the command prefix that gives each program the
// capabilities its DaemonSet gives it (as "daemonset"), or none (as
// "root": every capability of root): berth's agent keeps only SYS_CHROOT
// (deploy/base/daemonset.yaml), NFD's worker drops them all (its Helm
// chart's worker.securityContext); both run as uid 0.
func privileges(as string) (berth, nfd []string, err error) {
	switch as {
	case "root":
		return nil, nil, nil
	case "daemonset":
		drop := []string{"setpriv", "--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all"}
		return append(slices.Clone(drop), "--bounding-set=-all,+sys_chroot"), append(slices.Clone(drop), "--bounding-set=-all"), nil
	}
	return nil, nil, fmt.Errorf("-as %q: expected daemonset or root", as)
}

func main() {
	var o options
	flag.StringVar(&o.berth, "berth", "", "berth-cluster binary (runs `agent`)")
	flag.StringVar(&o.nfd, "nfd", "", "nfd-worker binary")
	flag.Var(&o.crds, "crd", "CRD manifest to install (repeatable): berth's NodeReport, NFD's API")
	flag.StringVar(&o.osRelease, "os-release", "", "file bind-mounted over /etc/os-release, rewritten to change a fact")
	flag.DurationVar(&o.interval, "interval", 2*time.Second, "report interval of both programs")
	flag.IntVar(&o.quiet, "quiet", 60, "intervals with nothing changing")
	flag.IntVar(&o.changing, "changing", 60, "intervals with the fact changing every -change-every intervals")
	flag.IntVar(&o.changeEvery, "change-every", 3, "change the fact every N intervals of the changing phase")
	flag.IntVar(&o.warmup, "warmup", 5, "intervals after both first published, before measuring")
	flag.DurationVar(&o.sampleEvery, "sample", 250*time.Millisecond, "RSS sampling period")
	flag.StringVar(&o.as, "as", "daemonset", "privileges: daemonset (the capabilities each DaemonSet grants) or root (all)")
	flag.Parse()
	if o.berth == "" || o.nfd == "" || o.osRelease == "" || len(o.crds) == 0 {
		fmt.Fprintln(os.Stderr, "footprint: -berth, -nfd, -os-release and -crd are required")
		os.Exit(2)
	}
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "footprint: %v\n", err)
		os.Exit(1)
	}
}

// proc is one measured program.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File

	mu      sync.Mutex
	samples []int64 // VmRSS in KiB, with the phase they were taken in
	anon    []int64 // RssAnon (heap, stacks) in KiB, taken with samples
	phases  []string
	phase   string
}

// cpuTicks returns user+system time of the process and of its waited-for
// children (berth's --live version commands), in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading /proc/%d/stat: %w", pid, err)
	}
	// Fields after the command name, which may hold spaces, in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): utime is field 14, cutime..cstime 16-17.
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var sum int64
	for _, k := range []int{11, 12, 13, 14} {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat field %d: %w", pid, k+3, err)
		}
		sum += v
	}
	return sum, nil
}

// status returns a "VmXXX:" value of /proc/<pid>/status in KiB.
func status(pid int, key string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading /proc/%d/status: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status %s: %w", pid, key, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, key)
}

func (p *proc) setPhase(ph string) { p.mu.Lock(); p.phase = ph; p.mu.Unlock() }

func (p *proc) sample() {
	kb, err := status(p.cmd.Process.Pid, "VmRSS")
	if err != nil {
		return
	}
	anon, err := status(p.cmd.Process.Pid, "RssAnon")
	if err != nil {
		return
	}
	p.mu.Lock()
	p.samples = append(p.samples, kb)
	p.anon = append(p.anon, anon)
	p.phases = append(p.phases, p.phase)
	p.mu.Unlock()
}

// rssIn returns the median and maximum of samples (VmRSS or RssAnon)
// taken in phase ph (KiB).
func (p *proc) rssIn(ph string, anon bool) (median, max int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var v []int64
	from := p.samples
	if anon {
		from = p.anon
	}
	for i, s := range from {
		if p.phases[i] == ph {
			v = append(v, s)
		}
	}
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	return v[len(v)/2], v[len(v)-1]
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start(name, logDir string, env []string, argv ...string) (*proc, error) {
	lf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, fmt.Errorf("creating %s's log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, argv[0], err)
	}
	return &proc{name: name, cmd: cmd, log: lf}, nil
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.log.Close()
}

// phaseResult is what one program did in one phase.
type phaseResult struct {
	Intervals      int     `json:"intervals"`
	CPUSeconds     float64 `json:"cpuSeconds"`
	CPUPerInterval float64 `json:"cpuMsPerInterval"`
	RSSMedianKiB   int64   `json:"rssMedianKiB"`
	RSSMaxKiB      int64   `json:"rssMaxKiB"`
	AnonMedianKiB  int64   `json:"anonMedianKiB"`
	Reads          int     `json:"reads"`
	Writes         int     `json:"writes"`
	Changes        int     `json:"changes"`
	from, to       time.Time
}

func run(ctx context.Context, o options, out io.Writer) error {
	crlog.SetLogger(logr.Discard())
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return errors.New("KUBEBUILDER_ASSETS is not set: run `. .ci/tools.env` (built by .ci/tools.sh)")
	}
	tmpParent := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		tmpParent = "/dev/shm"
	}
	tmp, err := os.MkdirTemp(tmpParent, "berth-footprint-")
	if err != nil {
		return fmt.Errorf("creating a work directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	policy := filepath.Join(tmp, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return fmt.Errorf("writing the audit policy: %w", err)
	}
	auditLog := filepath.Join(tmp, "audit.log")

	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDInstallOptions:     envtest.CRDInstallOptions{Paths: o.crds, ErrorIfPathMissing: true},
		ControlPlane: envtest.ControlPlane{
			Etcd:      &envtest.Etcd{DataDir: filepath.Join(tmp, "etcd")},
			APIServer: &envtest.APIServer{},
		},
	}
	args := te.ControlPlane.GetAPIServer().Configure()
	args.Set("advertise-address", "127.0.0.1")
	args.Set("bind-address", "127.0.0.1")
	args.Set("endpoint-reconciler-type", "none")
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", auditLog)
	args.Set("audit-log-format", "json")
	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		return fmt.Errorf("starting etcd and kube-apiserver from %s: %w", assets, err)
	}
	defer func() { _ = te.Stop() }()
	kubeconfig := filepath.Join(tmp, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, te.KubeConfig, 0o600); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Node %s: %w", nodeName, err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nfdNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Namespace %s: %w", nfdNamespace, err)
	}

	berthPre, nfdPre, err := privileges(o.as)
	if err != nil {
		return err
	}
	berthPort, err := freePort()
	if err != nil {
		return err
	}
	nfdPort, err := freePort()
	if err != nil {
		return err
	}
	// As the DaemonSet runs it (deploy/base/daemonset.yaml): the host's /
	// as the root, live; here the host is this machine itself.
	berth, err := start("berth-agent", tmp, []string{"NODE_NAME=" + nodeName},
		slices.Concat(berthPre, []string{o.berth, "agent", "--root=/", "--live", "--kubeconfig=" + kubeconfig,
			"--interval=" + o.interval.String(), fmt.Sprintf("--metrics-addr=127.0.0.1:%d", berthPort)})...)
	if err != nil {
		return err
	}
	defer berth.stop()
	// As NFD's worker DaemonSet runs it, all sources, with the sleep
	// interval made the same as berth's; without owner references, which
	// need the Pod it would run in.
	nfd, err := start("nfd-worker", tmp, []string{"NODE_NAME=" + nodeName, "KUBERNETES_NAMESPACE=" + nfdNamespace},
		slices.Concat(nfdPre, []string{o.nfd, "-kubeconfig=" + kubeconfig, "-owner-refs=", fmt.Sprintf("-port=%d", nfdPort),
			"-config=" + filepath.Join(tmp, "nfd-worker.conf"),
			fmt.Sprintf(`-options={"core":{"sleepInterval":%q}}`, o.interval.String())})...)
	if err != nil {
		return err
	}
	defer nfd.stop()
	procs := []*proc{berth, nfd}

	sampleCtx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(o.sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-sampleCtx.Done():
				return
			case <-t.C:
				for _, p := range procs {
					p.sample()
				}
			}
		}
	})
	defer func() { stopSampling(); wg.Wait() }()

	// Both have published once: the NodeReport and the NodeFeature exist.
	nodeReports := schema.GroupVersionResource{Group: "berth.dev", Version: "v1alpha1", Resource: "nodereports"}
	nodeFeatures := schema.GroupVersionResource{Group: "nfd.k8s-sigs.io", Version: "v1alpha1", Resource: "nodefeatures"}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, e1 := dyn.Resource(nodeReports).Get(ctx, nodeName, metav1.GetOptions{})
		_, e2 := dyn.Resource(nodeFeatures).Namespace(nfdNamespace).Get(ctx, nodeName, metav1.GetOptions{})
		if e1 == nil && e2 == nil {
			break
		}
		for _, p := range procs {
			if p.cmd.ProcessState != nil || p.cmd.Process.Signal(syscall.Signal(0)) != nil {
				return fmt.Errorf("%s exited before publishing; its log:\n%s", p.name, tail(p.log.Name()))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no NodeReport (%v) or NodeFeature (%v) after 2 minutes; logs:\n%s\n%s", e1, e2, tail(berth.log.Name()), tail(nfd.log.Name()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Duration(o.warmup) * o.interval)

	orig, err := os.ReadFile(o.osRelease)
	if err != nil {
		return fmt.Errorf("reading %s: %w", o.osRelease, err)
	}
	// Restore what the bind mount showed before, for the next run.
	defer func() { _ = rewrite(o.osRelease, orig) }()

	results := map[string]map[string]*phaseResult{}
	measure := func(ph string, intervals int, change func(i int) (bool, error)) error {
		before := map[string]int64{}
		for _, p := range procs {
			p.setPhase(ph)
			t, err := cpuTicks(p.cmd.Process.Pid)
			if err != nil {
				return err
			}
			before[p.name] = t
		}
		from := time.Now()
		changes := 0
		for i := range intervals {
			changed, err := change(i)
			if err != nil {
				return err
			}
			if changed {
				changes++
			}
			time.Sleep(o.interval)
		}
		to := time.Now()
		for _, p := range procs {
			p.setPhase("")
			t, err := cpuTicks(p.cmd.Process.Pid)
			if err != nil {
				return err
			}
			med, max := p.rssIn(ph, false)
			anon, _ := p.rssIn(ph, true)
			cpu := float64(t-before[p.name]) / 100 // USER_HZ is 100 on Linux
			if results[p.name] == nil {
				results[p.name] = map[string]*phaseResult{}
			}
			results[p.name][ph] = &phaseResult{
				Intervals: intervals, CPUSeconds: cpu, CPUPerInterval: 1000 * cpu / float64(intervals),
				RSSMedianKiB: med, RSSMaxKiB: max, AnonMedianKiB: anon, Changes: changes, from: from, to: to,
			}
		}
		return nil
	}
	if err := measure("quiet", o.quiet, func(int) (bool, error) { return false, nil }); err != nil {
		return err
	}
	version := 0
	err = measure("changing", o.changing, func(i int) (bool, error) {
		if i%o.changeEvery != 0 {
			return false, nil
		}
		version++
		return true, rewrite(o.osRelease, upgraded(orig, fmt.Sprintf("%d.bench", version)))
	})
	if err != nil {
		return err
	}
	// The last changes' publications and the watches' ends reach the log.
	time.Sleep(2 * o.interval)
	hwm := map[string]int64{}
	capEff := map[string]string{}
	for _, p := range procs {
		capEff[p.name] = capEffOf(p.cmd.Process.Pid)
		if v, err := status(p.cmd.Process.Pid, "VmHWM"); err == nil {
			hwm[p.name] = v
		}
	}
	stopSampling()
	wg.Wait()
	berth.stop()
	nfd.stop()
	agents, err := countAudit(auditLog, results)
	if err != nil {
		return err
	}
	return report(out, o, results, hwm, capEff, agents)
}

// rewrite replaces the content of a bind-mounted file in place: a rename
// would replace the mount's source and leave the mount on the old inode.
func rewrite(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("rewriting %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("rewriting %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("rewriting %s: %w", path, err)
	}
	return nil
}

// upgraded returns os-release content as an OS upgrade to version v leaves
// it: VERSION_ID and PRETTY_NAME (which berth's report shows) both change.
func upgraded(orig []byte, v string) []byte {
	var b strings.Builder
	for line := range strings.Lines(string(orig)) {
		if strings.HasPrefix(line, "VERSION_ID=") || strings.HasPrefix(line, "PRETTY_NAME=") {
			continue
		}
		b.WriteString(line)
	}
	fmt.Fprintf(&b, "VERSION_ID=%q\nPRETTY_NAME=%q\n", v, "bench OS "+v)
	return []byte(b.String())
}

// capEffOf returns the effective capability mask of pid, as a check that
// the privileges asked for are the ones the process has.
func capEffOf(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// auditEvent is the part of an audit.k8s.io/v1 Event counted here.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	Received  string `json:"requestReceivedTimestamp"`
	ObjectRef *struct {
		Resource string `json:"resource"`
	} `json:"objectRef"`
}

// program names the measured program a user agent belongs to.
func program(userAgent string) string {
	switch {
	case strings.HasPrefix(userAgent, "berth/"):
		return "berth-agent"
	case strings.HasPrefix(userAgent, "nfd-worker"):
		return "nfd-worker"
	}
	return ""
}

// countAudit adds each program's reads and writes per phase from the audit
// log and returns the user agents seen per program.
func countAudit(path string, results map[string]map[string]*phaseResult) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	agents := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log %s line %d: %w", path, line, err)
		}
		name := program(ev.UserAgent)
		if name == "" {
			continue
		}
		if !slices.Contains(agents[name], ev.UserAgent) {
			agents[name] = append(agents[name], ev.UserAgent)
		}
		at, err := time.Parse(time.RFC3339Nano, ev.Received)
		if err != nil {
			return nil, fmt.Errorf("audit log %s line %d: requestReceivedTimestamp: %w", path, line, err)
		}
		for _, r := range results[name] {
			if at.Before(r.from) || !at.Before(r.to) {
				continue
			}
			switch ev.Verb {
			case "get", "list", "watch":
				r.Reads++
			default:
				r.Writes++
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	return agents, nil
}

func mib(kib int64) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func report(out io.Writer, o options, res map[string]map[string]*phaseResult, hwm map[string]int64, capEff map[string]string, agents map[string][]string) error {
	b, n := res["berth-agent"], res["nfd-worker"]
	if b == nil || n == nil {
		return errors.New("missing results")
	}
	w := bufio.NewWriter(out)
	fmt.Fprintf(w, "privileges: %s; capabilities seen: berth %s, nfd %s\n", o.as, capEff["berth-agent"], capEff["nfd-worker"])
	fmt.Fprintf(w, "interval %s; quiet phase %d intervals; changing phase %d intervals, os-release VERSION_ID and PRETTY_NAME changed every %d (%d changes)\n\n",
		o.interval, o.quiet, o.changing, o.changeEvery, b["changing"].Changes)
	fmt.Fprintln(w, "| measure | `berth agent` | `nfd-worker` | ratio | goal | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	bMed, _ := b["quiet"].RSSMedianKiB, 0
	nMed := n["quiet"].RSSMedianKiB
	rssGoal := float64(max(hwm["berth-agent"], 1))/float64(max(hwm["nfd-worker"], 1)) <= 0.5
	fmt.Fprintf(w, "| RSS, peak (VmHWM over the run) | %s | %s | %s | <= 0.5x | %s |\n",
		mib(hwm["berth-agent"]), mib(hwm["nfd-worker"]), ratio(float64(hwm["berth-agent"]), float64(hwm["nfd-worker"])), yes(rssGoal))
	fmt.Fprintf(w, "| RSS, steady (median, quiet phase) | %s | %s | %s | <= 0.5x | %s |\n",
		mib(bMed), mib(nMed), ratio(float64(bMed), float64(nMed)), yes(float64(bMed) <= 0.5*float64(nMed)))
	ba, na := b["quiet"].AnonMedianKiB, n["quiet"].AnonMedianKiB
	fmt.Fprintf(w, "| of which anonymous (RssAnon: heap, stacks), steady | %s | %s | %s |  |  |\n",
		mib(ba), mib(na), ratio(float64(ba), float64(na)))
	for _, ph := range []string{"quiet", "changing"} {
		bc, nc := b[ph].CPUPerInterval, n[ph].CPUPerInterval
		fmt.Fprintf(w, "| CPU per interval, %s | %.1f ms | %.1f ms | %s | <= 0.5x | %s |\n",
			ph, bc, nc, ratio(bc, nc), yes(bc <= 0.5*nc))
	}
	for _, ph := range []string{"quiet", "changing"} {
		bi, ni := float64(b[ph].Intervals), float64(n[ph].Intervals)
		goal, met := "", ""
		if ph == "quiet" {
			goal, met = "0 writes", yes(b[ph].Writes == 0)
		}
		fmt.Fprintf(w, "| API requests per interval, %s: reads, writes | %.2f, %.2f | %.2f, %.2f |  | %s | %s |\n",
			ph, float64(b[ph].Reads)/bi, float64(b[ph].Writes)/bi, float64(n[ph].Reads)/ni, float64(n[ph].Writes)/ni, goal, met)
	}
	fmt.Fprintf(w, "| writes in the changing phase (changes: %d) | %d | %d |  |  |  |\n", b["changing"].Changes, b["changing"].Writes, n["changing"].Writes)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "user agents counted: berth %q, nfd %q\n", agents["berth-agent"], agents["nfd-worker"])
	raw, err := json.Marshal(map[string]any{"berth": b, "nfd": n, "vmHWMKiB": hwm})
	if err != nil {
		return fmt.Errorf("encoding the results: %w", err)
	}
	fmt.Fprintf(w, "RAW %s\n", raw)
	return w.Flush()
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}
