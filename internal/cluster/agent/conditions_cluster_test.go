package agent

import (
	"berth.dev/berth/internal/testkit/testenv"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
)

// TestKubectlWaitInstalled is issue #41's `kubectl wait
// --for=condition=Installed nodereport/<node>` with the real kubectl
// against the real kube-apiserver: it waits while the node has no
// install record, and returns once the node-installer's record of an
// installed platform is on the Node and the agent has published. A cycle
// that changes nothing writes nothing (metadata.generation stays), and
// the Ready condition keeps its lastTransitionTime across the change of
// Installed.
func TestKubectlWaitInstalled(t *testing.T) {
	testenv.Need(t)
	kubectl := filepath.Join(env.Assets, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is not in %s (%v): run `make tools`, which builds it with the control plane", env.Assets, err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteUserKubeconfig(kubeconfig, "berth-wait-test", "system:masters"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs, dyn := admin(t)
	const node = "wait-installed"
	createNodes(t, cs, []string{node})
	s := newSim(t, env.Admin, node, "snp-genoa-k3s-ready", nil)
	clock := epoch
	s.a.cfg.Now = func() time.Time { return clock }
	if err := s.a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	conds := func() ([]metav1.Condition, int64) {
		u := getReport(t, dyn, node)
		return storedConditions(u), u.GetGeneration()
	}
	before, _ := conds()
	if c := meta.FindStatusCondition(before, v1alpha1.ConditionInstalled); c == nil || c.Status != metav1.ConditionFalse || c.Reason != nodereport.ReasonNotInstalled {
		t.Fatalf("Installed before any install: %+v", c)
	}
	readyBefore := meta.FindStatusCondition(before, v1alpha1.ConditionReady)
	if readyBefore == nil || readyBefore.Status != metav1.ConditionTrue {
		t.Fatalf("Ready on a ready SNP host: %+v", readyBefore)
	}

	var out bytes.Buffer
	wait := exec.Command(kubectl, "--kubeconfig", kubeconfig, "wait", "--for=condition=Installed", "nodereport/"+node, "--timeout=90s")
	wait.Stdout, wait.Stderr = &out, &out
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wait.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("kubectl wait returned before the install: %v\n%s", err, out.String())
	case <-time.After(3 * time.Second):
	}

	// Nothing changed: nothing is written.
	_, gen := conds()
	clock = clock.Add(time.Minute)
	if err := s.a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if _, g := conds(); g != gen {
		t.Errorf("a cycle that changed nothing wrote the report (generation %d -> %d)", gen, g)
	}

	// The node-installer's record: k3s-qemu-snp installed.
	rec, err := nodereport.EncodeInstall(v1alpha1.InstallStatus{Version: "3.24.0", Time: metav1.NewTime(epoch),
		Platforms: []v1alpha1.PlatformInstall{{Name: "k3s-qemu-snp", Handler: "kata-qemu-snp", State: v1alpha1.InstallInstalled}}})
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.InstallStatusAnnotation: rec}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(time.Minute)
	if err := s.a.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || !strings.Contains(out.String(), "condition met") {
			t.Fatalf("kubectl wait: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		wait.Process.Kill()
		t.Fatalf("kubectl wait did not return after the install was published\n%s", out.String())
	}
	after, _ := conds()
	inst := meta.FindStatusCondition(after, v1alpha1.ConditionInstalled)
	if inst == nil || inst.Status != metav1.ConditionTrue || !inst.LastTransitionTime.Time.Equal(clock) {
		t.Errorf("Installed after the install: %+v, want True since %v", inst, clock)
	}
	if r := meta.FindStatusCondition(after, v1alpha1.ConditionReady); r == nil || !r.LastTransitionTime.Equal(&readyBefore.LastTransitionTime) {
		t.Errorf("Ready moved its lastTransitionTime without changing status: %+v, before %+v", r, readyBefore)
	}
	// kubectl's own view: the printer column and the negated wait.
	get, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "get", "nodereport", node).CombinedOutput()
	if err != nil || !strings.Contains(string(get), "INSTALLED") || !strings.Contains(string(get), "True") {
		t.Errorf("kubectl get nodereport: %v\n%s", err, get)
	}
	if b, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "wait", "--for=condition=Degraded=false", "nodereport/"+node, "--timeout=10s").CombinedOutput(); err != nil {
		t.Errorf("kubectl wait --for=condition=Degraded=false: %v\n%s", err, b)
	}
}
