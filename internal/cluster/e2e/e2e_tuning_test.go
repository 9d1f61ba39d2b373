package e2e

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"berth.dev/berth/internal/cluster/nodeinstall"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/testnode"
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

// userDropIn is the values' nodeInstaller.containerdUserDropIn.
const userDropIn = "[plugins.'io.containerd.cri.v1.images']\n  max_concurrent_downloads = 7\n"

// checkUserDropIn: the node-installer wrote the operator's containerd
// drop-in beside its handler drop-in, and containerd reads it (`containerd
// config dump` of the node's config, imports merged, has its setting). It
// returns the file's path.
func checkUserDropIn(t *testing.T, n *testnode.Node) string {
	t.Helper()
	var found string
	err := filepath.WalkDir(filepath.Dir(n.ContainerdConfig), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == configure.ContainerdUserDropInName {
			found = p
		}
		return err
	})
	if err != nil || found == "" {
		t.Errorf("no %s under %s (%v)", configure.ContainerdUserDropInName, filepath.Dir(n.ContainerdConfig), err)
		return filepath.Join(filepath.Dir(n.ContainerdConfig), configure.ContainerdUserDropInName)
	}
	if b, err := os.ReadFile(found); err != nil || !strings.Contains(string(b), userDropIn) {
		t.Errorf("%s: %v, or without the values' drop-in:\n%s", found, err, b)
	}
	bin := os.Getenv("BERTH_CONTAINERD2")
	if bin == "" {
		t.Fatal("BERTH_CONTAINERD2 is not set: run `. .ci/tools.env`")
	}
	out, err := exec.CommandContext(t.Context(), bin, "--config", n.ContainerdConfig, "config", "dump").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "max_concurrent_downloads = 7") {
		t.Errorf("containerd config dump of %s: %v, or without the drop-in's max_concurrent_downloads = 7:\n%s", n.ContainerdConfig, err, out)
	} else {
		t.Logf("the containerd drop-in %s is in containerd's config dump (max_concurrent_downloads = 7)", found)
	}
	return found
}
