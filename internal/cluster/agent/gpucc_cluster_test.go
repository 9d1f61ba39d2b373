package agent

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/platform"
)

// TestGPUNodesOnAPIServer runs the agent on the recorded facts of two
// confidential GPU fixtures against the real kube-apiserver: the HGX H100
// board in PPCIe mode, whose Node advertises eight nvidia.com/pgpu, and the
// H100 PCIe in CC mode, whose Node advertises none. Each Node gets the
// CC-mode label its facts say, the NodeReport the Node's GPU resources
// (and, without them, the gpu.allocatable warning). berth's RuntimeClass
// of the ready confidential GPU platform, created in the API server,
// carries the GPU operator's readiness selector, and the API server's
// RuntimeClass admission puts it on a pod of that class: the pod can land
// on the HGX node once cc-manager says the GPUs are ready, and not before.
func TestGPUNodesOnAPIServer(t *testing.T) {
	testenv.Need(t)
	cs, dyn := admin(t)
	ctx := context.Background()
	createNodes(t, cs, []string{"gpu-hgx", "gpu-h100"})
	n, err := cs.CoreV1().Nodes().Get(ctx, "gpu-hgx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What NVIDIA's sandbox device plugin makes the kubelet report: the
	// GPUs as nvidia.com/pgpu (P_GPU_ALIAS=pgpu, as the GPU operator
	// sets it), the NVSwitches under their model name.
	res := corev1.ResourceList{"nvidia.com/pgpu": resource.MustParse("8"), "nvidia.com/GH100_H100_NVSWITCH": resource.MustParse("4"),
		corev1.ResourceCPU: resource.MustParse("224"), corev1.ResourcePods: resource.MustParse("110")}
	n.Status.Capacity, n.Status.Allocatable = res, res
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		node, host, ccMode string
		resources          []v1alpha1.GPUResource
		warn               bool
	}{
		{"gpu-hgx", "hgx-h100-tdx-ppcie", "ppcie",
			[]v1alpha1.GPUResource{{Name: "nvidia.com/GH100_H100_NVSWITCH", Allocatable: 4}, {Name: "nvidia.com/pgpu", Allocatable: 8}}, false},
		{"gpu-h100", "h100-snp-cc-on", "on", nil, true},
	} {
		s := newSim(t, env.Admin, tc.node, tc.host, nil)
		if err := s.a.Cycle(ctx); err != nil {
			t.Fatalf("%s: %v", tc.node, err)
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, tc.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Labels[nodereport.GPUCCLabel]; got != tc.ccMode {
			t.Errorf("%s: label %s = %q, want %q (%s's recorded BAR0)", tc.node, nodereport.GPUCCLabel, got, tc.ccMode, tc.host)
		}
		var nr v1alpha1.NodeReport
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(getReport(t, dyn, tc.node).Object, &nr); err != nil {
			t.Fatal(err)
		}
		if got := nr.Report.GPUResources; len(got) != len(tc.resources) || len(got) > 0 && (got[0] != tc.resources[0] || got[len(got)-1] != tc.resources[len(got)-1]) {
			t.Errorf("%s: report gpuResources = %v, want %v", tc.node, got, tc.resources)
		}
		warned := false
		for _, f := range nr.Report.Findings {
			warned = warned || f.ID == nodereport.GPUAllocatableID && f.Status == v1alpha1.FindingWarn
		}
		if warned != tc.warn {
			t.Errorf("%s: gpu.allocatable warning %v, want %v (findings %v)", tc.node, warned, tc.warn, nr.Report.Findings)
		}
		// The Node's status is read every cycle on a GPU node; a quiet
		// cycle still costs two reads and no write.
		s.reads.Store(0)
		s.writes.Store(0)
		if err := s.a.Cycle(ctx); err != nil || s.reads.Load() != 2 || s.writes.Load() != 0 {
			t.Errorf("%s: quiet cycle: err %v, %d reads, %d writes; want 2 and 0", tc.node, err, s.reads.Load(), s.writes.Load())
		}
	}

	// The RuntimeClass of the confidential GPU platform the HGX node is
	// ready for.
	node, err := cs.CoreV1().Nodes().Get(ctx, "gpu-hgx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p platform.Platform
	for k, v := range node.Labels {
		name, ok := strings.CutPrefix(k, nodereport.PlatformLabelPrefix)
		if q, err := platform.Parse(name); ok && v == "true" && err == nil && q.GPU() && q.Confidential() {
			p = q
		}
	}
	if !p.Valid() {
		t.Fatalf("no confidential GPU platform label on gpu-hgx: %v", berthLabels(node))
	}
	var rc nodev1.RuntimeClass
	if err := yaml.Unmarshal(configure.RuntimeClass(p, configure.RuntimeClassOptions{}), &rc); err != nil {
		t.Fatal(err)
	}
	if rc.Scheduling == nil || rc.Scheduling.NodeSelector[platform.NVIDIACCReadyLabel] != "true" {
		t.Fatalf("RuntimeClass %s does not select %s=true: %+v", rc.Name, platform.NVIDIACCReadyLabel, rc.Scheduling)
	}
	if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, &rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("gpu-hgx is ready for %s: RuntimeClass %s selects %v", p, rc.Name, rc.Scheduling.NodeSelector)
	pod, err := cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "cuda"},
		Spec: corev1.PodSpec{RuntimeClassName: &rc.Name, Containers: []corev1.Container{{Name: "cuda", Image: "nvcr.io/nvidia/k8s/cuda-sample:vectoradd",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/pgpu": resource.MustParse("1")}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(pod.Spec.NodeSelector)
	if pod.Spec.NodeSelector[platform.NVIDIACCReadyLabel] != "true" || pod.Spec.NodeSelector[configure.PlatformLabel(p)] != "true" {
		t.Fatalf("pod of RuntimeClass %s has node selector %v, want %s and %s", rc.Name, pod.Spec.NodeSelector, platform.NVIDIACCReadyLabel, configure.PlatformLabel(p))
	}
	if sel.Matches(labels.Set(node.Labels)) {
		t.Errorf("the pod's selector %v matches gpu-hgx before cc-manager set %s", sel, platform.NVIDIACCReadyLabel)
	}
	// cc-manager sets the readiness label once the GPUs are in the mode
	// the node asked for.
	node.Labels[platform.NVIDIACCReadyLabel] = "true"
	if node, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{FieldManager: "cc-manager"}); err != nil {
		t.Fatal(err)
	}
	if !sel.Matches(labels.Set(node.Labels)) {
		t.Errorf("the pod's selector %v does not match gpu-hgx %v", sel, node.Labels)
	}
	h100, err := cs.CoreV1().Nodes().Get(ctx, "gpu-h100", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sel.Matches(labels.Set(h100.Labels)) {
		t.Errorf("the pod's selector %v matches gpu-h100, which is not ready for %s", sel, p)
	}
}
