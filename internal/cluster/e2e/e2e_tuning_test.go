package e2e

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/cluster/nodeinstall"
	"berth.dev/berth/internal/node/configure"
)

// tunedOverhead is the pod overhead the real-node test's values give the
// platform's class (runtimeClasses.overrides), in place of kata-deploy's
// 250m and 320Mi: small, so that the test node still fits the pod.
var tunedOverhead = map[string]string{"cpu": "300m", "memory": "200Mi"}

// checkTunedClasses: the real apiserver holds the platform's class with
// the overridden overhead and the merged selector (berth's installed label
// kept), and the default class kata with the same handler, overhead and
// selector, both created by helm install.
func checkTunedClasses(ctx context.Context, t *testing.T, cs *kubernetes.Clientset) {
	t.Helper()
	rc := runtimeClass(ctx, t, cs)
	wantSel := map[string]string{nodeinstall.InstalledLabelPrefix + platformName: "true", "kubernetes.io/os": "linux"}
	for _, name := range []string{rc.Name, configure.DefaultRuntimeClassName} {
		got, err := cs.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("RuntimeClass %s: %v", name, err)
			continue
		}
		if got.Handler != rc.Handler || !overheadIs(got, tunedOverhead) || got.Scheduling == nil || !maps.Equal(got.Scheduling.NodeSelector, wantSel) {
			t.Errorf("RuntimeClass %s: handler %s, overhead %v, scheduling %v; want handler %s, overhead %v, nodeSelector %v",
				name, got.Handler, got.Overhead, got.Scheduling, rc.Handler, tunedOverhead, wantSel)
			continue
		}
		t.Logf("RuntimeClass %s from helm install: handler %s, overhead %v, nodeSelector %v", name, got.Handler, tunedOverhead, got.Scheduling.NodeSelector)
	}
}

func overheadIs(rc *nodev1.RuntimeClass, want map[string]string) bool {
	if rc.Overhead == nil || len(rc.Overhead.PodFixed) != len(want) {
		return false
	}
	for k, v := range want {
		q, ok := rc.Overhead.PodFixed[corev1.ResourceName(k)]
		if !ok || q.String() != v {
			return false
		}
	}
	return true
}

// checkInstallerPod: the node-installer's pod carries the values' extra
// label, annotation and priority class (nodeInstaller.podLabels,
// podAnnotations, priorityClassName).
func checkInstallerPod(ctx context.Context, t *testing.T, cs *kubernetes.Clientset, name string) {
	t.Helper()
	p, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Labels["example.com/team"] != "platform" || p.Annotations["example.com/owner"] != "platform-team" || p.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("node-installer pod %s: labels %v, annotations %v, priority class %q; want the values' team label, owner annotation and system-cluster-critical",
			name, p.Labels, p.Annotations, p.Spec.PriorityClassName)
	}
}
