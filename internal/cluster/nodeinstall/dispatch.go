package nodeinstall

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/host/decodeerr"
)

// Job mode: instead of a DaemonSet whose privileged pod stays on every
// node, a dispatcher (an unprivileged Job, `node-installer dispatch`)
// lists the selected nodes and creates one Job per node from a template,
// pinned to that node, at most Parallelism unfinished at a time; each runs
// the node-installer with --run-once and ends, so that nothing privileged
// keeps running. kata-deploy 4.1's job mode works the same way.

var jobsResource = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}

// The labels and annotation on the per-node Jobs: which template made
// them, for which node (a hash: node names may be longer than a label
// value), in which mode and from which configuration.
const (
	JobGroupLabel      = v1alpha1.LabelPrefix + "node-installer-job"
	JobNodeLabel       = v1alpha1.LabelPrefix + "node-hash"
	JobModeLabel       = v1alpha1.LabelPrefix + "node-installer-mode"
	JobConfigLabel     = v1alpha1.LabelPrefix + "node-installer-config"
	JobNodeAnnotation  = v1alpha1.LabelPrefix + "node"
	RunOnceFlag        = "--run-once"
	maxJobTemplateName = validation.DNS1123LabelMaxLength - 1 - 8 - 1 - 6
)

// ParseJobTemplate reads the per-node Job template (YAML or JSON, as the
// chart renders it into the dispatcher's ConfigMap): a batch/v1 Job whose
// name, at most 47 characters, prefixes the per-node Jobs' names, with a
// container running node-installer with --run-once (or the Job would
// never end) and without --mode (the dispatcher sets the mode through the
// environment). file names the source in errors.
func ParseJobTemplate(data []byte, file string) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	if err := yaml.UnmarshalStrict(data, job); err != nil {
		// The decoder's text without what it quotes of the file
		// (decodeerr): --job-template may name any file.
		return nil, fmt.Errorf("%s: expected a batch/v1 Job: %s", file, decodeerr.Error(err))
	}
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		return nil, fmt.Errorf("%s: apiVersion %q, kind %q: expected batch/v1 Job", file, job.APIVersion, job.Kind)
	}
	if errs := validation.IsDNS1123Label(job.Name); len(errs) > 0 || len(job.Name) > maxJobTemplateName {
		return nil, fmt.Errorf("%s: metadata.name %q: expected a DNS label of at most %d characters (per-node Jobs add -<node>-<config>)", file, job.Name, maxJobTemplateName)
	}
	switch job.Spec.Template.Spec.RestartPolicy {
	case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
	default:
		return nil, fmt.Errorf("%s: spec.template.spec.restartPolicy %q: expected Never or OnFailure", file, job.Spec.Template.Spec.RestartPolicy)
	}
	found := false
	for i, c := range job.Spec.Template.Spec.Containers {
		argv := append(slices.Clone(c.Command), c.Args...)
		if !slices.Contains(argv, "node-installer") {
			continue
		}
		found = true
		if !slices.Contains(argv, RunOnceFlag) {
			return nil, fmt.Errorf("%s: spec.template.spec.containers[%d] (%s): node-installer without %s would never end", file, i, c.Name, RunOnceFlag)
		}
		if slices.ContainsFunc(argv, func(a string) bool { return a == "--mode" || strings.HasPrefix(a, "--mode=") }) {
			return nil, fmt.Errorf("%s: spec.template.spec.containers[%d] (%s) passes --mode, which overrides %s: leave it out", file, i, c.Name, ModeEnv)
		}
	}
	if !found {
		return nil, fmt.Errorf("%s: spec.template.spec.containers: no container runs node-installer", file)
	}
	return job, nil
}

// DispatchOptions are a dispatch's settings.
type DispatchOptions struct {
	// Namespace is where the Jobs go.
	Namespace string
	// Template is the per-node Job (ParseJobTemplate).
	Template *batchv1.Job
	// NodeSelector selects the nodes ("" every node), as a label selector.
	NodeSelector string
	// Parallelism bounds the per-node Jobs unfinished at once (0: 1).
	Parallelism int
	// Mode is what the per-node Jobs do (install or cleanup).
	Mode Mode
	// Delete removes the Jobs of this dispatch once every one succeeded
	// (teardown: nothing of the release may stay behind).
	Delete bool
	// Timeout bounds the whole dispatch (0: 30 minutes); Poll is the time
	// between looks (0: 2 s).
	Timeout, Poll time.Duration
	// Log receives progress; nil discards.
	Log *slog.Logger
}

// DispatchResult is what a dispatch did.
type DispatchResult struct {
	// Nodes are the selected nodes.
	Nodes []string `json:"nodes"`
	// Created are the Jobs created; Kept those of the same configuration
	// and mode found in place (a rerun); Deleted those of another
	// configuration, mode or node, and with Delete this dispatch's own.
	Created []string `json:"created,omitempty"`
	Kept    []string `json:"kept,omitempty"`
	Deleted []string `json:"deleted,omitempty"`
	// Failed are the nodes whose Job failed.
	Failed []string `json:"failed,omitempty"`
	// MaxUnfinished is the most Jobs seen unfinished at once.
	MaxUnfinished int `json:"maxUnfinished"`
}

// DispatchError is a dispatch whose Jobs failed or did not finish in time.
type DispatchError struct {
	Failed, Unfinished []string
	Timeout            time.Duration
	// Why holds, by failed node, the error its Job's pod last exited with
	// (a cleanup refused while Kata pods run names them), where the
	// dispatcher may list pods (the teardown hook's Role).
	Why map[string]string
}

func (e *DispatchError) Error() string {
	var parts []string
	if len(e.Failed) > 0 {
		failed := slices.Clone(e.Failed)
		for i, n := range failed {
			if w := e.Why[n]; w != "" {
				failed[i] = n + " (" + w + ")"
			}
		}
		parts = append(parts, "the node-installer Job failed on "+strings.Join(failed, ", "))
	}
	if len(e.Unfinished) > 0 {
		parts = append(parts, fmt.Sprintf("not finished within %s on %s", e.Timeout, strings.Join(e.Unfinished, ", ")))
	}
	return strings.Join(parts, "; ")
}

// shortHash is the first n hex digits of s's SHA-256.
func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// configHash identifies the template and mode: a Job made from another
// (a helm upgrade changed the platforms, say) is replaced.
func configHash(t *batchv1.Job, mode Mode) (string, error) {
	b, err := json.Marshal(struct {
		Labels map[string]string
		Spec   batchv1.JobSpec
		Mode   Mode
	}{t.Labels, t.Spec, mode})
	if err != nil {
		return "", fmt.Errorf("encoding the Job template: %w", err)
	}
	return shortHash(string(b), 6), nil
}

// nodeJob is the Job of node: the template pinned to the node (required
// node affinity on its name, as the DaemonSet controller pins its pods, so
// the scheduler still checks taints against the tolerations), with the
// mode in every node-installer container's environment.
func nodeJob(t *batchv1.Job, ns, node string, mode Mode, cfg string) *batchv1.Job {
	j := t.DeepCopy()
	nh := shortHash(node, 8)
	j.Name = t.Name + "-" + nh + "-" + cfg
	j.Namespace = ns
	j.ResourceVersion, j.UID = "", ""
	if j.Labels == nil {
		j.Labels = map[string]string{}
	}
	j.Labels[JobGroupLabel] = t.Name
	j.Labels[JobNodeLabel] = nh
	j.Labels[JobModeLabel] = string(mode)
	j.Labels[JobConfigLabel] = cfg
	if j.Annotations == nil {
		j.Annotations = map[string]string{}
	}
	j.Annotations[JobNodeAnnotation] = node
	ps := &j.Spec.Template.Spec
	if ps.Affinity == nil {
		ps.Affinity = &corev1.Affinity{}
	}
	ps.Affinity.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}},
		}}},
	}}
	for i, c := range ps.Containers {
		argv := append(slices.Clone(c.Command), c.Args...)
		if !slices.Contains(argv, "node-installer") {
			continue
		}
		env := slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool { return e.Name == ModeEnv })
		ps.Containers[i].Env = append(env, corev1.EnvVar{Name: ModeEnv, Value: string(mode)})
	}
	return j
}

// jobDone says whether a Job finished, and whether it succeeded.
func jobDone(j *batchv1.Job) (done, ok bool) {
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true
		case batchv1.JobFailed:
			return true, false
		}
	}
	return false, false
}

// Dispatch creates one Job per selected node from the template, at most
// Parallelism unfinished at a time, and waits until all have finished.
// A rerun with the same template and mode creates nothing for a node whose
// Job is there (finished or not); a Job of another template, mode or a node
// no longer selected is deleted (its pods with it) and, for a selected
// node, replaced. It returns a *DispatchError naming the nodes whose Job
// failed or did not finish in time.
func Dispatch(ctx context.Context, dyn dynamic.Interface, opt DispatchOptions) (*DispatchResult, error) {
	if opt.Template == nil || opt.Namespace == "" {
		return nil, errors.New("dispatch: a namespace and a Job template are required")
	}
	if _, err := ParseMode(string(opt.Mode)); err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	sel, err := labels.Parse(opt.NodeSelector)
	if err != nil {
		return nil, fmt.Errorf("dispatch: node selector %q: %w", opt.NodeSelector, err)
	}
	if opt.Parallelism <= 0 {
		opt.Parallelism = 1
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Minute
	}
	if opt.Poll <= 0 {
		opt.Poll = 2 * time.Second
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	cfg, err := configHash(opt.Template, opt.Mode)
	if err != nil {
		return nil, err
	}
	nl, err := dyn.Resource(nodesResource).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("listing the nodes (%q): %w", opt.NodeSelector, err)
	}
	res := &DispatchResult{}
	for _, u := range nl.Items {
		res.Nodes = append(res.Nodes, u.GetName())
	}
	slices.Sort(res.Nodes)
	byHash := map[string]string{}
	for _, n := range res.Nodes {
		byHash[shortHash(n, 8)] = n
	}

	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	jobs := dyn.Resource(jobsResource).Namespace(opt.Namespace)
	list := func() (map[string]*batchv1.Job, error) {
		jl, err := jobs.List(ctx, metav1.ListOptions{LabelSelector: labels.Set{JobGroupLabel: opt.Template.Name}.String()})
		if err != nil {
			return nil, fmt.Errorf("listing the node-installer Jobs in %s: %w", opt.Namespace, err)
		}
		out := map[string]*batchv1.Job{}
		for _, u := range jl.Items {
			j := &batchv1.Job{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, j); err != nil {
				return nil, fmt.Errorf("decoding Job %s: %w", u.GetName(), err)
			}
			if j.DeletionTimestamp != nil {
				continue
			}
			out[j.Name] = j
		}
		return out, nil
	}
	background := metav1.DeletePropagationBackground
	del := func(name string) error {
		err := jobs.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Job %s/%s: %w", opt.Namespace, name, err)
		}
		res.Deleted = append(res.Deleted, name)
		return nil
	}

	have, err := list()
	if err != nil {
		return res, err
	}
	mine := map[string]string{} // node -> its Job of this configuration
	for _, name := range slices.Sorted(maps.Keys(have)) {
		j := have[name]
		node, selected := byHash[j.Labels[JobNodeLabel]]
		if selected && j.Labels[JobConfigLabel] == cfg && j.Labels[JobModeLabel] == string(opt.Mode) && j.Annotations[JobNodeAnnotation] == node {
			if done, ok := jobDone(j); done && !ok {
				// A rerun retries the nodes whose Job failed.
				opt.Log.Info("deleting a failed node-installer Job, to run it again", "job", name, "node", node)
				if err := del(name); err != nil {
					return res, err
				}
				continue
			}
			mine[node] = name
			res.Kept = append(res.Kept, name)
			continue
		}
		opt.Log.Info("deleting a node-installer Job of another configuration, mode or node", "job", name, "node", j.Annotations[JobNodeAnnotation])
		if err := del(name); err != nil {
			return res, err
		}
	}
	queue := slices.DeleteFunc(slices.Clone(res.Nodes), func(n string) bool { _, ok := mine[n]; return ok })
	for {
		have, err := list()
		if err != nil {
			if ctx.Err() == nil {
				return res, err
			}
			have = nil
		}
		unfinished, failed := []string{}, []string{}
		for node, name := range mine {
			j, ok := have[name]
			if !ok {
				if have != nil {
					// Deleted by someone else: created again below.
					delete(mine, node)
					queue = append(queue, node)
				}
				continue
			}
			switch done, ok := jobDone(j); {
			case !done:
				unfinished = append(unfinished, node)
			case !ok:
				failed = append(failed, node)
			}
		}
		for ctx.Err() == nil && len(queue) > 0 && len(unfinished) < opt.Parallelism {
			node := queue[0]
			j := nodeJob(opt.Template, opt.Namespace, node, opt.Mode, cfg)
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(j)
			if err != nil {
				return res, fmt.Errorf("encoding the Job of node %s: %w", node, err)
			}
			obj["apiVersion"], obj["kind"] = "batch/v1", "Job"
			if _, err := jobs.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: FieldManager}); err != nil && !apierrors.IsAlreadyExists(err) {
				return res, fmt.Errorf("creating the node-installer Job of node %s: %w", node, err)
			}
			opt.Log.Info("node-installer Job created", "job", j.Name, "node", node, "mode", opt.Mode)
			res.Created = append(res.Created, j.Name)
			mine[node] = j.Name
			queue = queue[1:]
			unfinished = append(unfinished, node)
		}
		res.MaxUnfinished = max(res.MaxUnfinished, len(unfinished))
		if len(unfinished) == 0 && len(queue) == 0 {
			slices.Sort(failed)
			res.Failed = failed
			if len(failed) > 0 {
				return res, &DispatchError{Failed: failed, Why: jobFailures(ctx, dyn, opt.Namespace, mine, failed)}
			}
			opt.Log.Info("every node's Job succeeded", "nodes", len(res.Nodes), "mode", opt.Mode)
			if opt.Delete {
				for _, node := range slices.Sorted(maps.Keys(mine)) {
					if err := del(mine[node]); err != nil {
						return res, err
					}
				}
			}
			return res, nil
		}
		select {
		case <-ctx.Done():
			slices.Sort(failed)
			res.Failed = failed
			left := append(unfinished, queue...)
			slices.Sort(left)
			return res, &DispatchError{Failed: failed, Unfinished: left, Timeout: opt.Timeout,
				Why: jobFailures(context.WithoutCancel(ctx), dyn, opt.Namespace, mine, failed)}
		case <-time.After(opt.Poll):
		}
	}
}

// jobFailures are, by node, the errors the pods of the failed nodes' Jobs
// (jobs: Job name by node) last exited with (lastFailure); nil where the
// pods cannot be listed (the install dispatcher's Role has no pods).
func jobFailures(ctx context.Context, dyn dynamic.Interface, namespace string, jobs map[string]string, failed []string) map[string]string {
	out := map[string]string{}
	for _, node := range failed {
		pl, err := dyn.Resource(podsResource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + jobs[node]})
		if err != nil {
			return nil
		}
		for _, u := range pl.Items {
			pod := &corev1.Pod{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod) != nil {
				continue
			}
			if msg := lastFailure(pod, nil); msg != "" {
				out[node] = msg
			}
		}
	}
	return out
}
