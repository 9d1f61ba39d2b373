package nodeinstall

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/testkit/testenv"
)

var namespacesResource = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

func toUnstructured(t *testing.T, obj any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// createDaemonSet creates a node-installer DaemonSet shaped like the
// chart's (the container runs `berth-cluster node-installer`, a sidecar
// does not) in a fresh namespace.
func createDaemonSet(t *testing.T, dyn dynamic.Interface, ns string, args []string) *appsv1.DaemonSet {
	t.Helper()
	ctx := context.Background()
	if _, err := dyn.Resource(namespacesResource).Create(ctx, toUnstructured(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app.kubernetes.io/name": "berth-node-installer"}
	ds := &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "berth-node-installer", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "node-installer", Image: "berth:test", Command: []string{"berth-cluster"}, Args: args,
						Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}},
					{Name: "sidecar", Image: "busybox", Command: []string{"sleep", "infinity"}},
				}},
			},
		},
	}
	u, err := dyn.Resource(daemonSetResource).Namespace(ns).Create(ctx, toUnstructured(t, ds), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := &appsv1.DaemonSet{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// simulateController does what the DaemonSet controller and the kubelets
// would do once the template is in cleanup mode (no kubelet runs here):
// it records the rollout in the DaemonSet's status, creates one pod per
// node from the new template and marks it Ready, and, as each
// node-installer's cleanup would, removes the installer's labels from the
// node. skip names nodes whose cleanup never finishes.
func simulateController(t *testing.T, dyn dynamic.Interface, ns string, nodes []string, skip string) {
	t.Helper()
	ctx := context.Background()
	dsRes := dyn.Resource(daemonSetResource).Namespace(ns)
	var ds *appsv1.DaemonSet
	deadline := time.Now().Add(30 * time.Second)
	for {
		u, err := dsRes.Get(ctx, "berth-node-installer", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ds = &appsv1.DaemonSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ds); err != nil {
			t.Fatal(err)
		}
		if cleanupEnv(ds.Spec.Template.Spec.Containers[0]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the DaemonSet was not switched to cleanup: %+v", ds.Spec.Template.Spec.Containers)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c := ds.Spec.Template.Spec.Containers[1]; len(c.Env) != 0 {
		t.Errorf("teardown changed the sidecar: %+v", c.Env)
	}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: int32(len(nodes)), NumberReady: int32(len(nodes)), UpdatedNumberScheduled: int32(len(nodes))}
	if _, err := dsRes.UpdateStatus(ctx, toUnstructured(t, ds), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	podRes := dyn.Resource(podsResource).Namespace(ns)
	for _, n := range nodes {
		pod := &corev1.Pod{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "berth-node-installer-" + n, Namespace: ns, Labels: ds.Spec.Template.Labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds.Name, UID: ds.UID}}},
			Spec: ds.Spec.Template.Spec,
		}
		pod.Spec.NodeName = n
		u, err := podRes.Create(ctx, toUnstructured(t, pod), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n == skip {
			// Its cleanup was refused: a Kata pod runs there, and the
			// node-installer exited saying so (its log's tail is the
			// termination message).
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
				t.Fatal(err)
			}
			pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "node-installer", Image: "berth:test", ImageID: "berth:test",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
					Message: "time=... level=INFO msg=\"berth node-installer starting\"\nError: node-installer (cleanup) on " + n + ": " + refusedOnSkip + "\n"}}}}
			if _, err := podRes.UpdateStatus(ctx, toUnstructured(t, pod), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := dyn.Resource(nodesResource).Apply(ctx, n, applyLabelsObj(n, nil), applyAs(FieldManager)); err != nil {
			t.Fatal(err)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if _, err := podRes.UpdateStatus(ctx, toUnstructured(t, pod), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// refusedOnSkip is the refusal the node that never finishes reports.
const refusedOnSkip = "refusing to remove handler kata-qemu: 1 pod runs on handler kata-qemu on this node: shop/web-0"

// TestTeardown runs the pre-delete hook's teardown against a real
// DaemonSet in a real API server. No kubelet or DaemonSet controller
// runs: the test plays their part (simulateController) once teardown has
// switched the template, so what is proven is teardown's side: the patch
// (only the node-installer container, env only), and that it waits for
// every node's labels to go and every pod to be ready in cleanup mode,
// naming what is left when the timeout passes, and the node-installer's
// last failure there (a cleanup refused while Kata pods run).
func TestTeardown(t *testing.T) {
	testenv.Need(t)
	dyn := dynClient(t)
	asJob := clientAs(t, "berth-teardown-test", teardownRules)
	for i, tc := range []struct {
		name    string
		args    []string
		skip    string
		wantErr string
	}{
		{name: "every node cleans up", args: []string{"node-installer", "--root=/host", "--live", "-p", "kubeadm-qemu-none"}},
		{name: "a node never finishes", args: []string{"node-installer"}, skip: "td-b", wantErr: "td-b"},
		{name: "--mode in the template", args: []string{"node-installer", "--mode=install"}, wantErr: "passes --mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := fmt.Sprintf("berth-td-%d", i)
			nodes := []string{fmt.Sprintf("td-a-%d", i), "td-b"}
			if tc.skip == "" {
				nodes[1] = fmt.Sprintf("td-b-%d", i)
			}
			for _, n := range nodes {
				createNode(t, dyn, n, nil)
				if _, err := dyn.Resource(nodesResource).Apply(context.Background(), n, applyLabelsObj(n, map[string]string{InstalledLabelPrefix + "kubeadm-qemu-none": "true"}), applyAs(FieldManager)); err != nil {
					t.Fatal(err)
				}
			}
			createDaemonSet(t, dyn, ns, tc.args)
			timeout := 30 * time.Second
			if tc.skip != "" {
				timeout = 3 * time.Second
			}
			done := make(chan error, 1)
			go func() {
				done <- Teardown(context.Background(), asJob, TeardownOptions{Namespace: ns, DaemonSet: "berth-node-installer", Timeout: timeout, Poll: 100 * time.Millisecond})
			}()
			if !strings.Contains(tc.wantErr, "--mode") {
				simulateController(t, dyn, ns, nodes, tc.skip)
			}
			err := <-done
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("teardown: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("teardown: %v, want an error naming %q", err, tc.wantErr)
			}
			if tc.skip != "" {
				var te *TeardownError
				if !errors.As(err, &te) || len(te.Nodes) != 1 || te.Nodes[0] != tc.skip || len(te.Pods) != 1 || !strings.Contains(te.Pods[0], tc.skip) {
					t.Errorf("timeout error: %#v", err)
				}
				// The hook says why: the refusal, with the pod it names.
				if !strings.Contains(err.Error(), tc.skip+": node-installer (cleanup) on "+tc.skip+": "+refusedOnSkip) {
					t.Errorf("the timeout does not say the cleanup was refused: %v", err)
				}
			}
		})
	}
}
