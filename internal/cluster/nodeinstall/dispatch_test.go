package nodeinstall

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/testkit/testenv"
)

// dispatchRules are the dispatcher's RBAC as the chart grants it (there a
// Role confines the Jobs to the release's namespace).
var dispatchRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}},
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"list", "create", "delete"}},
}

// hookJobRules are the teardown hook's RBAC in job mode: the
// dispatcher's, and pods list, which lets it say why a node's cleanup
// Job failed.
var hookJobRules = append(slices.Clone(dispatchRules), rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}})

const jobTemplateFile = "testdata/job-template.yaml"

func jobTemplate(t *testing.T) *batchv1.Job {
	t.Helper()
	data, err := os.ReadFile(jobTemplateFile)
	if err != nil {
		t.Fatal(err)
	}
	j, err := ParseJobTemplate(data, jobTemplateFile)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestParseJobTemplate: a template that cannot make node-pinned Jobs
// that end is refused, naming the file and the field.
func TestParseJobTemplate(t *testing.T) {
	good, err := os.ReadFile(jobTemplateFile)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new, want string
	}{
		{"not YAML", "kind: Job", "kind: [Job", "expected a batch/v1 Job"},
		{"unknown field", "  backoffLimit: 2", "  backofLimit: 2", "unknown field"},
		{"a secret for a key", "  backoffLimit: 2", "  \"root:$y$SECRETHASH:19000::\": 2", "unknown field"},
		{"a DaemonSet", "kind: Job", "kind: DaemonSet", `kind "DaemonSet": expected batch/v1 Job`},
		{"name too long", "name: berth-node-installer\n  labels", "name: " + strings.Repeat("n", 48) + "\n  labels", "at most 47 characters"},
		{"no name", "name: berth-node-installer\n  labels", "labels", "metadata.name"},
		{"restarts always", "restartPolicy: Never", "restartPolicy: Always", "expected Never or OnFailure"},
		{"without --run-once", "        - --run-once\n", "", "without --run-once would never end"},
		{"with --mode", "        - --run-once\n", "        - --run-once\n        - --mode=install\n", "passes --mode"},
		{"no node-installer", "        - node-installer\n", "", "no container runs node-installer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tt.old, tt.new, 1)
			if bad == string(good) {
				t.Fatalf("%q not in the template", tt.old)
			}
			_, err := ParseJobTemplate([]byte(bad), "job.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "job.yaml: ") {
				t.Errorf("error %v, want one naming job.yaml and containing %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "SECRETHASH") {
				t.Errorf("the error quotes the file: %v", err)
			}
		})
	}
}

// FuzzParseJobTemplate: any input is a Job template or an error, never a
// panic, and an accepted one makes a Job pinned to its node.
func FuzzParseJobTemplate(f *testing.F) {
	good, err := os.ReadFile(jobTemplateFile)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\n"))
	f.Add([]byte(`{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"a"},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","args":["node-installer","--run-once"]}]}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJobTemplate(data, "job.yaml")
		if err != nil {
			return
		}
		nj := nodeJob(j, "ns", "node-1", ModeCleanup, "abcdef")
		if len(nj.Name) > 63 || nj.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0] != "node-1" {
			t.Errorf("Job %q not pinned to node-1 or its name too long", nj.Name)
		}
	})
}

// jobController plays the Job controller (the test control plane runs
// none): every poll it finishes the oldest unfinished Job, failing those
// of the nodes in fail, and records the most Jobs unfinished at once.
type jobController struct {
	t    *testing.T
	dyn  dynamic.Interface
	ns   string
	fail map[string]bool

	mu            sync.Mutex
	maxUnfinished int
}

func (c *jobController) run(ctx context.Context) {
	for ctx.Err() == nil {
		jl, err := c.dyn.Resource(jobsResource).Namespace(c.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			if ctx.Err() == nil {
				c.t.Errorf("listing Jobs: %v", err)
			}
			return
		}
		var open []*batchv1.Job
		for _, u := range jl.Items {
			j := &batchv1.Job{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, j); err != nil {
				c.t.Error(err)
				return
			}
			if done, _ := jobDone(j); !done && j.DeletionTimestamp == nil {
				open = append(open, j)
			}
		}
		c.mu.Lock()
		c.maxUnfinished = max(c.maxUnfinished, len(open))
		c.mu.Unlock()
		if len(open) > 0 {
			slices.SortFunc(open, func(a, b *batchv1.Job) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
			c.finish(ctx, open[0], !c.fail[open[0].Annotations[JobNodeAnnotation]])
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// finish sets a Job's status as the Job controller does at its end.
func (c *jobController) finish(ctx context.Context, j *batchv1.Job, ok bool) {
	now := metav1.Now()
	j.Status.StartTime = &now
	if ok {
		j.Status.CompletionTime = &now
		j.Status.Succeeded = 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		}
	} else {
		// Its pod failed as a refused cleanup does: the node-installer's
		// last log line is the termination message.
		pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: j.Name + "-x", Namespace: c.ns, Labels: map[string]string{"batch.kubernetes.io/job-name": j.Name}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "node-installer", Image: "berth:test"}}}}
		pu, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
		if err != nil {
			c.t.Error(err)
			return
		}
		created, err := c.dyn.Resource(podsResource).Namespace(c.ns).Create(ctx, &unstructured.Unstructured{Object: pu}, metav1.CreateOptions{})
		if err == nil {
			pod.ResourceVersion = created.GetResourceVersion()
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node-installer", Image: "berth:test", ImageID: "berth:test",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "Error: " + refusedOnSkip + "\n"}}}}
			if su, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod); err == nil {
				_, err = c.dyn.Resource(podsResource).Namespace(c.ns).UpdateStatus(ctx, &unstructured.Unstructured{Object: su}, metav1.UpdateOptions{})
			}
			if err != nil && ctx.Err() == nil {
				c.t.Errorf("the failed pod's status: %v", err)
			}
		} else if ctx.Err() == nil && !apierrors.IsAlreadyExists(err) {
			c.t.Errorf("creating the failed Job's pod: %v", err)
		}
		j.Status.Failed = 1
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastProbeTime: now, LastTransitionTime: now},
		}
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(j)
	if err != nil {
		c.t.Error(err)
		return
	}
	if _, err := c.dyn.Resource(jobsResource).Namespace(c.ns).UpdateStatus(ctx, &unstructured.Unstructured{Object: obj}, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil {
		c.t.Errorf("finishing Job %s: %v", j.Name, err)
	}
}

// dispatchWith runs Dispatch while c finishes the Jobs.
func dispatchWith(t *testing.T, c *jobController, dyn dynamic.Interface, opt DispatchOptions) (*DispatchResult, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	return Dispatch(context.Background(), dyn, opt)
}

// listJobs are the namespace's Jobs by node.
func listJobs(t *testing.T, dyn dynamic.Interface, ns string) map[string][]*batchv1.Job {
	t.Helper()
	jl, err := dyn.Resource(jobsResource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*batchv1.Job{}
	for _, u := range jl.Items {
		j := &batchv1.Job{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, j); err != nil {
			t.Fatal(err)
		}
		if j.DeletionTimestamp == nil {
			out[j.Annotations[JobNodeAnnotation]] = append(out[j.Annotations[JobNodeAnnotation]], j)
		}
	}
	return out
}

// TestDispatch runs the dispatcher, with the chart's RBAC, against the
// real API server: one Job per selected node and none for the others,
// each pinned to its node and in the dispatch's mode, never more than
// Parallelism unfinished at once; a rerun creates nothing; a cleanup
// dispatch replaces the install Jobs, reports a node whose Job failed,
// retries it on a rerun and, once every node succeeded, deletes its Jobs.
func TestDispatch(t *testing.T) {
	testenv.Need(t)
	dyn := dynClient(t)
	const ns = "berth-dispatch"
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if _, err := testenv.Clientset(t, env.Admin).CoreV1().Namespaces().Create(context.Background(), nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var selected []string
	for i := range 5 {
		name := fmt.Sprintf("ni-dispatch-%d", i)
		createNode(t, dyn, name, map[string]string{"berth.dev/install": "true"})
		selected = append(selected, name)
	}
	createNode(t, dyn, "ni-dispatch-other", map[string]string{"berth.dev/install": "false"})
	asDispatcher := clientAs(t, "berth-dispatcher-test", dispatchRules)
	opt := DispatchOptions{Namespace: ns, Template: jobTemplate(t), NodeSelector: "berth.dev/install=true",
		Parallelism: 2, Mode: ModeInstall, Poll: 20 * time.Millisecond, Timeout: time.Minute}

	c := &jobController{t: t, dyn: dyn, ns: ns}
	res, err := dispatchWith(t, c, asDispatcher, opt)
	if err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	if !slices.Equal(res.Nodes, selected) || len(res.Created) != 5 || len(res.Kept) != 0 || len(res.Deleted) != 0 {
		t.Errorf("dispatch: %+v", res)
	}
	if res.MaxUnfinished != 2 || c.maxUnfinished > 2 {
		t.Errorf("unfinished at once: dispatcher saw %d, controller %d; want 2 and at most 2", res.MaxUnfinished, c.maxUnfinished)
	}
	jobs := listJobs(t, dyn, ns)
	if len(jobs) != 5 {
		t.Errorf("Jobs for %d nodes, want the 5 selected", len(jobs))
	}
	for _, node := range selected {
		js := jobs[node]
		if len(js) != 1 {
			t.Errorf("%s: %d Jobs", node, len(js))
			continue
		}
		j := js[0]
		terms := j.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) != 1 || len(terms[0].MatchFields) != 1 || terms[0].MatchFields[0].Key != "metadata.name" || !slices.Equal(terms[0].MatchFields[0].Values, []string{node}) {
			t.Errorf("%s: Job %s pinned by %+v", node, j.Name, terms)
		}
		env := j.Spec.Template.Spec.Containers[0].Env
		if i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == ModeEnv }); i < 0 || env[i].Value != "install" || slices.ContainsFunc(env[i+1:], func(e corev1.EnvVar) bool { return e.Name == ModeEnv }) {
			t.Errorf("%s: env %+v, want %s=install once", node, env, ModeEnv)
		}
		if j.Labels[JobGroupLabel] != "berth-node-installer" || j.Labels["app.kubernetes.io/name"] != "berth-node-installer" || len(j.Name) > 63 {
			t.Errorf("%s: Job %s labels %v", node, j.Name, j.Labels)
		}
	}

	// A rerun (helm upgrade with the same values) creates nothing.
	res, err = dispatchWith(t, c, asDispatcher, opt)
	if err != nil || len(res.Created) != 0 || len(res.Kept) != 5 || len(res.Deleted) != 0 {
		t.Errorf("rerun: %+v, %v", res, err)
	}
	if n := len(listJobs(t, dyn, ns)); n != 5 {
		t.Errorf("after the rerun, Jobs for %d nodes", n)
	}

	// Teardown: cleanup Jobs replace the install Jobs; one node fails.
	c = &jobController{t: t, dyn: dyn, ns: ns, fail: map[string]bool{selected[3]: true}}
	clean := opt
	clean.Mode, clean.Delete, clean.Parallelism = ModeCleanup, true, 3
	res, err = dispatchWith(t, c, clientAs(t, "berth-hook-jobs-test", hookJobRules), clean)
	var de *DispatchError
	if !errors.As(err, &de) || !slices.Equal(de.Failed, []string{selected[3]}) || !strings.Contains(err.Error(), selected[3]) {
		t.Fatalf("cleanup with a failing node: %v", err)
	}
	// The hook says why: the refusal its pod exited with.
	if !strings.Contains(err.Error(), selected[3]+" ("+refusedOnSkip+")") {
		t.Errorf("the failed cleanup does not say why: %v", err)
	}
	if len(res.Deleted) != 5 || len(res.Created) != 5 || res.MaxUnfinished != 3 || c.maxUnfinished > 3 {
		t.Errorf("cleanup: %+v (controller saw %d unfinished)", res, c.maxUnfinished)
	}
	for node, js := range listJobs(t, dyn, ns) {
		if len(js) != 1 || js[0].Labels[JobModeLabel] != "cleanup" {
			t.Errorf("%s after the cleanup: %d Jobs, mode %s", node, len(js), js[0].Labels[JobModeLabel])
		}
	}
	// The rerun retries the failed node only, then deletes every Job.
	c.fail = nil
	res, err = dispatchWith(t, c, asDispatcher, clean)
	if err != nil || len(res.Created) != 1 || len(res.Kept) != 4 {
		t.Errorf("cleanup rerun: %+v, %v", res, err)
	}
	if left := listJobs(t, dyn, ns); len(left) != 0 {
		t.Errorf("Jobs left after the teardown: %v", left)
	}
}

// TestTeardownJobs: job mode's teardown, with the chart's hook RBAC, puts
// a cleanup Job on every selected node in place of its install Job and,
// once all succeeded, leaves no Job behind.
func TestTeardownJobs(t *testing.T) {
	testenv.Need(t)
	dyn := dynClient(t)
	const ns = "berth-teardown-jobs"
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	if _, err := testenv.Clientset(t, env.Admin).CoreV1().Namespaces().Create(context.Background(), nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		createNode(t, dyn, fmt.Sprintf("ni-tdjobs-%d", i), map[string]string{"berth.dev/teardown-jobs": "true"})
	}
	d := DispatchOptions{Namespace: ns, Template: jobTemplate(t), NodeSelector: "berth.dev/teardown-jobs=true", Mode: ModeInstall, Poll: 20 * time.Millisecond}
	c := &jobController{t: t, dyn: dyn, ns: ns}
	if _, err := dispatchWith(t, c, dyn, d); err != nil {
		t.Fatalf("install dispatch: %v", err)
	}
	asHook := clientAs(t, "berth-teardown-jobs-test", dispatchRules)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.run(ctx); close(done) }()
	err := Teardown(context.Background(), asHook, TeardownOptions{Namespace: ns, Jobs: &d, Timeout: time.Minute})
	cancel()
	<-done
	if err != nil {
		t.Fatalf("teardown: %v", err)
	}
	if left := listJobs(t, dyn, ns); len(left) != 0 {
		t.Errorf("Jobs left: %v", left)
	}
}
