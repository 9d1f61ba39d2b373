package nodeinstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/cluster/nodelabels"
	"berth.dev/berth/internal/node/configure"
)

// TeardownOptions select the DaemonSet Teardown switches to cleanup.
type TeardownOptions struct {
	Namespace string
	DaemonSet string
	// AgentDaemonSet, when set, is the agent's DaemonSet in Namespace:
	// once every node is cleaned up, it is deleted and the agent's labels
	// are removed from every node (removeAgent).
	AgentDaemonSet string
	// Jobs, when set, is job mode's dispatch: instead of switching a
	// DaemonSet, Teardown dispatches cleanup Jobs to the nodes (its Mode
	// and Delete are set here) and waits for them; DaemonSet is then
	// unused.
	Jobs *DispatchOptions
	// Suffix is the release's install suffix: teardown waits for the
	// installed labels of that install only (its field manager's).
	Suffix configure.Suffix
	// Timeout bounds the wait (0: 10 minutes).
	Timeout time.Duration
	// Poll is the time between looks (0: 2 s).
	Poll time.Duration
	// Log receives progress; nil discards.
	Log *slog.Logger
}

// TeardownError is a teardown that timed out: the nodes still labelled
// by the installer and the pods not ready in cleanup mode.
type TeardownError struct {
	Timeout time.Duration
	Nodes   []string
	Pods    []string
	// Refused are the last failures of the node-installer on the nodes
	// not done ("node: message"): a cleanup refused while Kata pods run
	// there names them (BerthRemovalBlocked), so that the hook's log and
	// error say why the uninstall waits.
	Refused []string
	// Rollout says when the DaemonSet controller had not caught up yet.
	Rollout string
}

func (e *TeardownError) Error() string {
	var parts []string
	if len(e.Nodes) > 0 {
		parts = append(parts, "nodes still labelled by the node-installer: "+strings.Join(e.Nodes, ", "))
	}
	if len(e.Pods) > 0 {
		parts = append(parts, "pods not ready in cleanup mode: "+strings.Join(e.Pods, ", "))
	}
	if len(e.Refused) > 0 {
		parts = append(parts, "the node-installer's last run failed on "+strings.Join(e.Refused, "; "))
	}
	if e.Rollout != "" {
		parts = append(parts, e.Rollout)
	}
	return fmt.Sprintf("cleanup not finished within %s: %s", e.Timeout, strings.Join(parts, "; "))
}

// Teardown is the Helm pre-delete hook: it switches the node-installer
// DaemonSet's pod template to cleanup mode (ModeEnv=cleanup on each
// container running node-installer), then waits until no Node carries an
// installed label set by the installer and every pod of the DaemonSet is
// ready in cleanup mode. The DaemonSet's own rolling update (maxUnavailable
// 1) paces the cleanup one node at a time, as the install was paced.
//
// Why a hook rather than a preStop: a preStop runs on every pod stop
// (a drain, an upgrade, an eviction), where removing the runtime would be
// wrong, and Helm does not wait for it; the hook runs only on uninstall
// and holds the uninstall until every node is clean.
func Teardown(ctx context.Context, dyn dynamic.Interface, opt TeardownOptions) error {
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Minute
	}
	if opt.Poll <= 0 {
		opt.Poll = 2 * time.Second
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	if opt.Jobs != nil {
		return teardownJobs(ctx, dyn, opt)
	}
	dsRes := dyn.Resource(daemonSetResource).Namespace(opt.Namespace)
	ds, err := getDaemonSet(ctx, dyn, opt)
	if err != nil {
		return err
	}
	names, err := installerContainers(ds)
	if err != nil {
		return err
	}
	var patch []map[string]any
	for _, c := range ds.Spec.Template.Spec.Containers {
		if slices.Contains(names, c.Name) && !cleanupEnv(c) {
			patch = append(patch, map[string]any{"name": c.Name, "env": []any{map[string]any{"name": ModeEnv, "value": string(ModeCleanup), "valueFrom": nil}}})
		}
	}
	if len(patch) > 0 {
		body, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": patch}}}})
		if err != nil {
			return fmt.Errorf("encoding the patch: %w", err)
		}
		if _, err := dsRes.Patch(ctx, opt.DaemonSet, types.StrategicMergePatchType, body, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("switching daemonset %s/%s to cleanup: %w", opt.Namespace, opt.DaemonSet, err)
		}
		opt.Log.Info("daemonset switched to cleanup", "daemonset", opt.Namespace+"/"+opt.DaemonSet, "containers", names)
	}

	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	var last *TeardownError
	said := map[string]bool{}
	for {
		st, err := teardownState(ctx, dyn, opt, names)
		if err == nil {
			for _, r := range st.Refused {
				if !said[r] {
					said[r] = true
					opt.Log.Warn("cleanup failed on a node; it is retried when its pod restarts", "failure", r)
				}
			}
		}
		switch {
		case err == nil && len(st.Nodes) == 0 && len(st.Pods) == 0 && st.Rollout == "":
			opt.Log.Info("every node cleaned up", "daemonset", opt.Namespace+"/"+opt.DaemonSet)
			if opt.AgentDaemonSet == "" {
				return nil
			}
			return removeAgent(ctx, dyn, opt)
		case err == nil:
			last = st
		case ctx.Err() == nil:
			// The API server may be busy: look again until the timeout.
			opt.Log.Warn("looking at the cleanup", "err", err)
		}
		select {
		case <-ctx.Done():
			if last == nil {
				if err == nil {
					err = ctx.Err()
				}
				return fmt.Errorf("cleanup not confirmed within %s: %w", opt.Timeout, err)
			}
			last.Timeout = opt.Timeout
			return last
		case <-time.After(opt.Poll):
		}
	}
}

func getDaemonSet(ctx context.Context, dyn dynamic.Interface, opt TeardownOptions) (*appsv1.DaemonSet, error) {
	u, err := dyn.Resource(daemonSetResource).Namespace(opt.Namespace).Get(ctx, opt.DaemonSet, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading daemonset %s/%s: %w", opt.Namespace, opt.DaemonSet, err)
	}
	ds := &appsv1.DaemonSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ds); err != nil {
		return nil, fmt.Errorf("decoding daemonset %s/%s: %w", opt.Namespace, opt.DaemonSet, err)
	}
	return ds, nil
}

// installerContainers are the containers of the pod template that run the
// node-installer (node-installer in their command or arguments). One that
// passes --mode is refused: the flag would override the environment the
// teardown sets.
func installerContainers(ds *appsv1.DaemonSet) ([]string, error) {
	var names []string
	for _, c := range ds.Spec.Template.Spec.Containers {
		argv := append(slices.Clone(c.Command), c.Args...)
		if !slices.Contains(argv, "node-installer") {
			continue
		}
		for _, a := range argv {
			if a == "--mode" || strings.HasPrefix(a, "--mode=") {
				return nil, fmt.Errorf("daemonset %s/%s: container %s passes --mode, which overrides %s: leave it out of the pod template", ds.Namespace, ds.Name, c.Name, ModeEnv)
			}
		}
		names = append(names, c.Name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("daemonset %s/%s: no container runs node-installer", ds.Namespace, ds.Name)
	}
	return names, nil
}

func cleanupEnv(c corev1.Container) bool {
	for _, e := range c.Env {
		if e.Name == ModeEnv {
			return e.Value == string(ModeCleanup) && e.ValueFrom == nil
		}
	}
	return false
}

// teardownState is what is left: labelled nodes, pods not ready in
// cleanup mode, and a rollout the controller has not caught up with.
func teardownState(ctx context.Context, dyn dynamic.Interface, opt TeardownOptions, names []string) (*TeardownError, error) {
	ds, err := getDaemonSet(ctx, dyn, opt)
	if err != nil {
		return nil, err
	}
	st := &TeardownError{}
	if ds.Status.ObservedGeneration < ds.Generation {
		st.Rollout = fmt.Sprintf("the DaemonSet controller has not seen generation %d yet", ds.Generation)
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("daemonset %s/%s selector: %w", opt.Namespace, opt.DaemonSet, err)
	}
	pl, err := dyn.Resource(podsResource).Namespace(opt.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of daemonset %s/%s: %w", opt.Namespace, opt.DaemonSet, err)
	}
	done := 0
	for _, u := range pl.Items {
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
			return nil, fmt.Errorf("decoding pod %s: %w", u.GetName(), err)
		}
		if !ownedBy(pod, ds) {
			continue
		}
		if cleanupPod(pod, names) && podReady(pod) {
			done++
			continue
		}
		st.Pods = append(st.Pods, pod.Name+" on "+orNone(pod.Spec.NodeName))
		if msg := lastFailure(pod, names); msg != "" {
			st.Refused = append(st.Refused, orNone(pod.Spec.NodeName)+": "+msg)
		}
	}
	if want := int(ds.Status.DesiredNumberScheduled); done < want && st.Rollout == "" {
		st.Rollout = fmt.Sprintf("%d of %d pods ready in cleanup mode", done, want)
	}
	nl, err := dyn.Resource(nodesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	for _, u := range nl.Items {
		node := &corev1.Node{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, node); err != nil {
			return nil, fmt.Errorf("decoding node %s: %w", u.GetName(), err)
		}
		for k := range nodelabels.Owned(node, opt.Suffix.FieldManager()) {
			if _, on := node.Labels[k]; on && strings.HasPrefix(k, InstalledLabelPrefix) {
				st.Nodes = append(st.Nodes, node.Name)
				break
			}
		}
	}
	slices.Sort(st.Nodes)
	slices.Sort(st.Pods)
	slices.Sort(st.Refused)
	return st, nil
}

// maxFailureLen bounds a failure quoted from a pod's status.
const maxFailureLen = 1024

// lastFailure is the error the node-installer container of pod (one of
// names; nil: any) last exited with: the last line of its termination
// message (the chart sets terminationMessagePolicy FallbackToLogsOnError,
// so the message is the tail of its log, whose last line is the error),
// "" when it has not failed.
func lastFailure(pod *corev1.Pod, names []string) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if names != nil && !slices.Contains(names, cs.Name) {
			continue
		}
		for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if term == nil || term.ExitCode == 0 {
				continue
			}
			lines := strings.Split(strings.TrimSpace(term.Message), "\n")
			msg := strings.TrimPrefix(strings.TrimSpace(lines[len(lines)-1]), "Error: ")
			if msg == "" {
				msg = fmt.Sprintf("exit %d (%s)", term.ExitCode, term.Reason)
			}
			if len(msg) > maxFailureLen {
				msg = msg[:maxFailureLen] + "…"
			}
			return msg
		}
	}
	return ""
}

func ownedBy(pod *corev1.Pod, ds *appsv1.DaemonSet) bool {
	for _, o := range pod.OwnerReferences {
		if o.UID == ds.UID {
			return true
		}
	}
	return false
}

// cleanupPod reports whether every node-installer container of the pod
// runs in cleanup mode.
func cleanupPod(pod *corev1.Pod, names []string) bool {
	found := false
	for _, c := range pod.Spec.Containers {
		if !slices.Contains(names, c.Name) {
			continue
		}
		if !cleanupEnv(c) {
			return false
		}
		found = true
	}
	return found
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "(no node)"
	}
	return s
}

// IsTeardownTimeout reports whether err is a teardown that timed out.
func IsTeardownTimeout(err error) bool {
	var te *TeardownError
	return errors.As(err, &te)
}

// teardownJobs is Teardown in job mode: a cleanup Job on every node the
// install Jobs went to (deleting those), waited for and then deleted, as
// nothing of the release may stay; then the agent goes.
func teardownJobs(ctx context.Context, dyn dynamic.Interface, opt TeardownOptions) error {
	d := *opt.Jobs
	d.Mode, d.Delete, d.Timeout, d.Log = ModeCleanup, true, opt.Timeout, opt.Log
	if d.Namespace == "" {
		d.Namespace = opt.Namespace
	}
	if _, err := Dispatch(ctx, dyn, d); err != nil {
		return fmt.Errorf("cleanup Jobs: %w", err)
	}
	if opt.AgentDaemonSet == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	return removeAgent(ctx, dyn, opt)
}
