// Package agent is the node agent of cluster mode (`berth agent`, run by
// the DaemonSet): it evaluates its node on start, on every interval and on
// demand (SIGHUP), and publishes the node's NodeReport and berth.dev/ node
// labels with server-side apply.
//
// Writes are driven by content, not time: each cycle reads the NodeReport
// and the Node back (two GETs) and applies only what differs from the
// desired state, so a quiet interval costs two reads and no writes, and a
// report or label edited by hand is restored on the next cycle. The
// comparison re-hashes the report that was read, so an edit that kept the
// old contentHash is noticed too.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodelabels"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/evaluate/preflight"
)

// Config configures an Agent.
type Config struct {
	// NodeName is the node this agent reports on (and its NodeReport's name).
	NodeName string
	// Version is written into the report (BerthVersion).
	Version string
	// Evaluate discovers the node and evaluates its platforms; the command
	// wires it to preflight.Run over the host root.
	Evaluate func(ctx context.Context) (preflight.Result, error)
	// Interval between cycles; zero means 10 minutes.
	Interval time.Duration
	// BackoffInitial and BackoffMax bound the retry delay after a failed
	// publish (doubling, with ±20% jitter); zero means 1 s and 30 s.
	BackoffInitial, BackoffMax time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Log receives cycle and publish events; nil discards.
	Log *slog.Logger
	// Metrics, when set, is updated on every cycle.
	Metrics *Metrics
	// KataDeployLabels also publishes kata-deploy's TEE label
	// (amd.feature.node.kubernetes.io/snp, intel.feature.node.kubernetes.io/tdx)
	// for clusters whose kata-deploy RuntimeClasses select on it without
	// NFD's rules; off by default, since NFD may own those labels.
	KataDeployLabels bool
}

// nodes is the Node resource. The agent reaches Nodes through the dynamic
// and metadata clients like its NodeReports: the typed clientset would
// register every Kubernetes API group at start-up, which costs every berth
// command (berth facts, berth check) milliseconds and megabytes.
var nodes = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}

// Agent publishes one node's report. Build it with New.
type Agent struct {
	cfg Config
	dyn dynamic.Interface
	// meta reads the Node: only its metadata (labels, annotations, UID,
	// managed fields) is used, and a real Node's status (its image list
	// alone is kilobytes) is neither sent nor decoded every interval.
	meta metadata.Interface

	mu        sync.Mutex
	published string // content hash of the last verified or written report
	ready     bool
}

// New returns an agent that reaches the API server with kc; its clients
// share one connection.
func New(cfg Config, kc *rest.Config) (*Agent, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("agent: no node name (--node-name or NODE_NAME)")
	}
	if cfg.Evaluate == nil {
		return nil, errors.New("agent: no Evaluate function")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Minute
	}
	if cfg.BackoffInitial <= 0 {
		cfg.BackoffInitial = time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 30 * time.Second
	}
	if cfg.BackoffMax < cfg.BackoffInitial {
		cfg.BackoffMax = cfg.BackoffInitial
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	// One request budget (QPS and burst) for both clients, as for one.
	kc = rest.CopyConfig(kc)
	if kc.RateLimiter == nil {
		qps, burst := kc.QPS, kc.Burst
		if qps == 0 {
			qps = rest.DefaultQPS
		}
		if burst == 0 {
			burst = rest.DefaultBurst
		}
		kc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	hc, err := rest.HTTPClientFor(kc)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(kc, hc)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	meta, err := metadata.NewForConfigAndClient(kc, hc)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes metadata client: %w", err)
	}
	return &Agent{cfg: cfg, dyn: dyn, meta: meta}, nil
}

// Ready reports whether the last publish (write or verification) succeeded.
func (a *Agent) Ready() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ready
}

// Published returns the content hash last published or verified.
func (a *Agent) Published() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.published
}

// Run evaluates and publishes now, then every interval and whenever
// trigger fires, until ctx is done (a clean shutdown returns nil). A
// failed publish is retried with backoff until it succeeds or the next
// cycle replaces it.
func (a *Agent) Run(ctx context.Context, trigger <-chan struct{}) error {
	next := time.NewTimer(0)
	defer next.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var pending *desired // evaluated but not yet published
	failures := 0
	for {
		evaluate := false
		select {
		case <-ctx.Done():
			a.cfg.Log.Info("agent stopping", "node", a.cfg.NodeName)
			return nil
		case <-next.C:
			evaluate = true
		case <-trigger:
			a.cfg.Log.Info("re-evaluating on request", "node", a.cfg.NodeName)
			evaluate = true
		case <-retry.C:
		}
		if evaluate {
			if !next.Stop() {
				select {
				case <-next.C:
				default:
				}
			}
			next.Reset(a.cfg.Interval)
			d, err := a.evaluate(ctx)
			if err != nil {
				a.cfg.Log.Error("evaluation failed", "node", a.cfg.NodeName, "err", err)
				continue
			}
			pending = d
		}
		if pending == nil {
			continue
		}
		if err := a.sync(ctx, pending); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			delay := a.backoff(failures)
			failures++
			a.cfg.Log.Warn("publish failed; retrying", "node", a.cfg.NodeName, "err", err, "in", delay.Round(time.Millisecond), "attempt", failures)
			retry.Reset(delay)
			continue
		}
		if failures > 0 {
			a.cfg.Log.Info("publish caught up", "node", a.cfg.NodeName, "after", failures)
		}
		failures, pending = 0, nil
		retry.Stop()
	}
}

// Cycle evaluates and publishes once, without retrying.
func (a *Agent) Cycle(ctx context.Context) error {
	d, err := a.evaluate(ctx)
	if err != nil {
		return err
	}
	return a.sync(ctx, d)
}

// backoff is the delay before retry n (0-based): doubling from
// BackoffInitial up to BackoffMax, with ±20% jitter so that a fleet of
// agents does not retry in lockstep when the API server returns.
func (a *Agent) backoff(n int) time.Duration {
	d := a.cfg.BackoffInitial
	for i := 0; i < n && d < a.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, a.cfg.BackoffMax)
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// desired is what one evaluation wants published.
type desired struct {
	report v1alpha1.Report
	labels map[string]string
}

func (a *Agent) evaluate(ctx context.Context) (*desired, error) {
	start := a.cfg.Now()
	res, err := a.cfg.Evaluate(ctx)
	if err != nil {
		return nil, fmt.Errorf("evaluating node %s: %w", a.cfg.NodeName, err)
	}
	r := nodereport.Build(a.cfg.NodeName, a.cfg.Version, res.Facts, res.Verdicts, a.cfg.Now())
	if m := a.cfg.Metrics; m != nil {
		m.observeCheck(a.cfg.Now().Sub(start), r.Summary)
	}
	labels := nodereport.Labels(&r)
	if a.cfg.KataDeployLabels {
		maps.Copy(labels, nodereport.KataDeployLabels(&r))
	}
	return &desired{report: r, labels: labels}, nil
}

// sync reads the Node and the NodeReport and applies what differs.
func (a *Agent) sync(ctx context.Context, d *desired) error {
	hash, err := a.syncOnce(ctx, d)
	a.mu.Lock()
	a.ready = err == nil
	if err == nil {
		a.published = hash
	}
	a.mu.Unlock()
	if err != nil && a.cfg.Metrics != nil {
		a.cfg.Metrics.PublishErrors.Inc()
	}
	return err
}

// syncOnce applies what differs and returns the content hash of the
// report it verified or wrote.
func (a *Agent) syncOnce(ctx context.Context, d *desired) (string, error) {
	name := a.cfg.NodeName
	node, err := a.node(ctx, name, len(d.report.Facts.GPUs) > 0)
	if err != nil {
		return "", err
	}
	report := nodereport.WithInstall(d.report, a.installStatus(node))
	if len(d.report.Facts.GPUs) > 0 {
		report = nodereport.WithGPUResources(report, node.Status.Allocatable)
	}
	if nodelabels.Differ(node.Labels, d.labels, nodelabels.Owned(node, v1alpha1.FieldManager), isOwnLabel) {
		labels := make(map[string]any, len(d.labels))
		for k, v := range d.labels {
			labels[k] = v
		}
		ac := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Node",
			"metadata": map[string]any{"name": name, "labels": labels},
		}}
		if _, err := a.dyn.Resource(nodes).Apply(ctx, name, ac, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager, Force: true}); err != nil {
			return "", fmt.Errorf("applying labels to node %s: %w", name, err)
		}
		a.wrote("labels")
		a.cfg.Log.Info("node labels published", "node", name, "labels", len(d.labels))
	}
	res := a.dyn.Resource(v1alpha1.GroupVersionResource)
	cur, err := res.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cur = nil
	case err != nil:
		return "", fmt.Errorf("reading NodeReport %s: %w", name, err)
	}
	// The conditions follow from the report and those stored: a status
	// that does not change keeps its lastTransitionTime.
	prev := storedConditions(cur)
	conds := nodereport.Conditions(prev, report, a.cfg.Now())
	if cur != nil && reportCurrent(cur, report, node.UID) && nodereport.SameConditions(prev, conds) {
		return report.ContentHash, nil
	}
	obj, err := reportObject(node, report, v1alpha1.NodeReportStatus{Conditions: conds})
	if err != nil {
		return "", err
	}
	_, err = res.Apply(ctx, name, obj, metav1.ApplyOptions{FieldManager: v1alpha1.FieldManager, Force: true})
	if apierrors.IsInvalid(err) && cur != nil {
		// Server-side apply turns an object that lost its last field
		// (a node whose TEE went away: facts.tee from {snp: ...} to {})
		// into null, which the CRD's schema refuses (kubernetes/kubernetes
		// #117447, #135841). Replace the object instead; the next apply
		// takes the fields over again.
		a.cfg.Log.Info("apply refused; replacing the NodeReport", "node", name, "err", err)
		obj.SetResourceVersion(cur.GetResourceVersion())
		_, err = res.Update(ctx, obj, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManager})
	}
	if err != nil {
		return "", fmt.Errorf("applying NodeReport %s: %w", name, err)
	}
	a.wrote("report")
	a.cfg.Log.Info("NodeReport published", "node", name, "hash", report.ContentHash, "replaced", cur != nil)
	return report.ContentHash, nil
}

// node reads the agent's Node: its metadata only, or with withStatus the
// whole object, whose status carries the allocatable of the GPU device
// plugins. Only a node with a GPU pays for the status (a real Node's image
// list alone is kilobytes); it is still one read per cycle.
func (a *Agent) node(ctx context.Context, name string, withStatus bool) (*corev1.Node, error) {
	if !withStatus {
		m, err := a.meta.Resource(nodes).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", name, err)
		}
		return &corev1.Node{ObjectMeta: m.ObjectMeta}, nil
	}
	u, err := a.dyn.Resource(nodes).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	node := &corev1.Node{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, node); err != nil {
		return nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	return node, nil
}

// installStatus is the node-installer's record on the node (its
// InstallStatusAnnotation), nil when there is none. A record the agent
// cannot read is left out of the report with a warning saying why: the
// rest of the report is still worth publishing.
func (a *Agent) installStatus(node *corev1.Node) *v1alpha1.InstallStatus {
	v, ok := node.Annotations[v1alpha1.InstallStatusAnnotation]
	if !ok {
		return nil
	}
	s, err := nodereport.DecodeInstall(v)
	if err != nil {
		a.cfg.Log.Warn("ignoring the node-installer's install status", "node", node.Name, "err", err)
		return nil
	}
	return s
}

func (a *Agent) wrote(what string) {
	if m := a.cfg.Metrics; m != nil {
		m.Publishes.WithLabelValues(what).Inc()
	}
}

func isOwnLabel(k string) bool {
	return k == nodereport.TEELabel || k == nodereport.KVMLabel || k == nodereport.GPUCCLabel || strings.HasPrefix(k, nodereport.PlatformLabelPrefix) ||
		nodereport.IsKataDeployLabel(k)
}

// reportCurrent reports whether the stored object already holds the
// desired content and is owned by the node. The stored report is decoded
// and re-hashed, so a hand edit is noticed even if it kept contentHash.
func reportCurrent(cur *unstructured.Unstructured, want v1alpha1.Report, uid any) bool {
	raw, ok := cur.Object["report"].(map[string]any)
	if !ok {
		return false
	}
	var have v1alpha1.Report
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &have); err != nil {
		return false
	}
	if have.ContentHash != want.ContentHash || nodereport.Hash(have) != want.ContentHash {
		return false
	}
	for _, o := range cur.GetOwnerReferences() {
		if o.Kind == "Node" && o.APIVersion == "v1" && string(o.UID) == fmt.Sprint(uid) {
			return true
		}
	}
	return false
}

// storedConditions are the conditions of the stored report (nil when
// there is none, or they do not decode: they are then made anew).
func storedConditions(cur *unstructured.Unstructured) []metav1.Condition {
	if cur == nil {
		return nil
	}
	raw, ok, err := unstructured.NestedSlice(cur.Object, "status", "conditions")
	if !ok || err != nil {
		return nil
	}
	var out []metav1.Condition
	for _, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			return nil
		}
		var c metav1.Condition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c); err != nil {
			return nil
		}
		out = append(out, c)
	}
	return out
}

// reportObject is the apply configuration of the NodeReport: the whole
// report and its status, owned by its Node so that deleting the node
// garbage-collects it.
func reportObject(node *corev1.Node, r v1alpha1.Report, status v1alpha1.NodeReportStatus) (*unstructured.Unstructured, error) {
	nr := v1alpha1.NodeReport{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:   node.Name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "berth"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}},
		},
		Report: r,
		Status: status,
	}
	// Through encoding/json, as the hash is computed: the unstructured
	// converter turns empty structs (a node without TEE) into null, which
	// the CRD's schema refuses.
	b, err := json.Marshal(&nr)
	if err != nil {
		return nil, fmt.Errorf("encoding NodeReport %s: %w", node.Name, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("encoding NodeReport %s: %w", node.Name, err)
	}
	// The zero creationTimestamp is written as null, which an apply would
	// claim ownership of.
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}
