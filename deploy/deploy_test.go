package deploy_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/testkit/testenv"
)

// env is the control plane shared by the package's tests. Tests that need
// the base installed call installBase first; applying it twice is a no-op.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{ControllerManager: true}, &env))
}

// accessCase is one request made with some identity's credentials and
// whether RBAC and the admission policies must let it through; why is part
// of the refusal message expected otherwise.
type accessCase struct {
	name    string
	do      func(context.Context) error
	allowed bool
	why     string
}

// runAccessCases runs each case as a subtest against the real API server.
func runAccessCases(t *testing.T, tests []accessCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do(ctx(t))
			switch {
			case tt.allowed && err != nil:
				t.Errorf("want allowed, got %v", err)
			case !tt.allowed && err == nil:
				t.Errorf("want forbidden, but the request succeeded")
			case !tt.allowed && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tt.why)):
				t.Errorf("want Forbidden because %q, got %v", tt.why, err)
			case !tt.allowed:
				t.Logf("refused: %v", err)
			}
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// kubectl runs the kubectl built with the control plane as the admin.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := env.KubectlCmd(ctx(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// installBase applies the kustomize base with kubectl, as a user would, and
// waits until the admission policy is in force: the API server loads new
// policies asynchronously, about a second after they are created.
func installBase(t *testing.T) {
	t.Helper()
	kubectl(t, "apply", "--server-side", "--field-manager=berth-test", "-k", ".")
	// CEL type errors only show as warnings in the policy's status, which
	// kube-controller-manager fills in.
	vapClient := testenv.Clientset(t, env.Admin).AdmissionregistrationV1().ValidatingAdmissionPolicies()
	var warnings []string
	err := wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, 30*time.Second, true, func(c context.Context) (bool, error) {
		p, err := vapClient.Get(c, "berth-agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
			return false, nil
		}
		for _, w := range p.Status.TypeChecking.ExpressionWarnings {
			warnings = append(warnings, w.FieldRef+": "+w.Warning)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the admission policy's type checking did not finish: %v", err)
	}
	if len(warnings) > 0 {
		t.Fatalf("the admission policy does not type-check:\n%s", strings.Join(warnings, "\n"))
	}
	probe := env.AsAgent("policy-probe")
	err = wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, 30*time.Second, true, func(c context.Context) (bool, error) {
		err := applyReportOpts(c, probe, "not-policy-probe", nil, []string{metav1.DryRunAll})
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "berth-agent"), nil
	})
	if err != nil {
		t.Fatalf("the berth-agent admission policy did not take effect: %v", err)
	}
}

func TestKubectlDryRun(t *testing.T) {
	testenv.Need(t)
	// A server-side dry run does not create the namespace, so the namespaced
	// objects would be refused on a fresh cluster: create it first.
	kubectl(t, "apply", "-f", "base/namespace.yaml")
	out := kubectl(t, "apply", "--dry-run=server", "-k", ".")
	for _, want := range []string{
		"namespace/berth-system",
		"customresourcedefinition.apiextensions.k8s.io/nodereports.berth.dev",
		"serviceaccount/berth-agent",
		"clusterrole.rbac.authorization.k8s.io/berth-agent",
		"clusterrolebinding.rbac.authorization.k8s.io/berth-agent",
		"validatingadmissionpolicy.admissionregistration.k8s.io/berth-agent",
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/berth-agent",
		"daemonset.apps/berth-agent",
		"serviceaccount/berth-node-installer",
		"clusterrole.rbac.authorization.k8s.io/berth-node-installer",
		"clusterrolebinding.rbac.authorization.k8s.io/berth-node-installer",
		"configmap/berth-node-installer",
		"validatingadmissionpolicy.admissionregistration.k8s.io/berth-node-installer",
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/berth-node-installer",
		"validatingadmissionpolicy.admissionregistration.k8s.io/berth-node-installer-events",
		"validatingadmissionpolicybinding.admissionregistration.k8s.io/berth-node-installer-events",
		"daemonset.apps/berth-node-installer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply --dry-run=server -k deploy/ did not report %s:\n%s", want, out)
		}
	}
	// The overlay must build and pass server validation too.
	kubectl(t, "apply", "--dry-run=server", "-k", "overlays/kvm-probe")
}

// fullReport sets every field of a Report to a realistic value that the
// schema accepts. TestCRDRoundTrip checks none is left zero.
func fullReport(node string) v1alpha1.Report {
	return v1alpha1.Report{
		NodeName:     node,
		BerthVersion: "v0.3.0",
		ContentHash:  "sha256:" + strings.Repeat("ab", 32),
		ObservedAt:   metav1.NewTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)),
		Summary:      v1alpha1.Summary{Ready: 2, Warn: 1, NotReady: 3},
		Facts: v1alpha1.FactsSummary{
			CPU:           v1alpha1.CPUSummary{Vendor: "AuthenticAMD", Model: "AMD EPYC 9454 48-Core Processor", ProductLine: "genoa"},
			Virt:          v1alpha1.VirtSummary{Guest: true, Hypervisor: "kvm"},
			KernelRelease: "6.12.0-snp-host",
			OS:            "Ubuntu 24.04.2 LTS",
			Distribution:  "k3s",
			Runtimes:      v1alpha1.RuntimeVersions{Containerd: "2.1.4", CRIO: "1.33.0"},
			Hypervisors:   v1alpha1.HypervisorVersions{QEMU: "9.2.0", CloudHypervisor: "45.0", Firecracker: "1.12.0"},
			KVMUsable:     true,
			IOMMUGroups:   84,
			TEE: v1alpha1.TEESummary{
				SNP: &v1alpha1.SNPSummary{Enabled: true, FirmwareVersion: "1.55", SNPASIDs: 99},
				TDX: &v1alpha1.TDXSummary{ModuleInitialized: true, ModuleVersion: "1.5.06"},
			},
			GPUs:    []v1alpha1.GPUSummary{{Model: "NVIDIA H100 PCIe", VFIO: true, Isolated: true, ConfidentialCapable: true, CCMode: "on"}},
			Modules: v1alpha1.ModuleSummary{KVM: true, VhostVsock: true, VhostNet: true, VFIOPCI: true},
			Unknown: 2,
		},
		Platforms: []v1alpha1.PlatformVerdict{
			{Name: "k3s-qemu-snp-genoa", Verdict: v1alpha1.VerdictReady},
			{Name: "k3s-qemu-tdx", Verdict: v1alpha1.VerdictNotReady, FirstBlocker: "tee.tdx.cpu"},
			{Name: "k3s-qemu-none", Verdict: v1alpha1.VerdictWarn},
		},
		Findings: []v1alpha1.Finding{
			{ID: "tee.tdx.cpu", Status: v1alpha1.FindingFail, Message: "the CPU is not an Intel CPU", Remedy: "schedule TDX workloads on Intel nodes"},
			{ID: "runtime.containerd.version", Status: v1alpha1.FindingWarn, Message: "containerd 1.7 is near end of life", Remedy: "upgrade containerd"},
		},
		FindingsOmitted: 4,
		Install: &v1alpha1.InstallStatus{
			Version: "3.24.0",
			Digest:  "sha256:" + strings.Repeat("cd", 32),
			Time:    metav1.NewTime(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)),
			Platforms: []v1alpha1.PlatformInstall{
				{Name: "k3s-qemu-tdx", Handler: "kata-qemu-tdx", State: v1alpha1.InstallFailed, Error: "fetching kata-static: 404"},
				{Name: "k3s-qemu-snp-genoa", Handler: "kata-qemu-snp", State: v1alpha1.InstallInstalled},
			},
			PlatformsOmitted: 1,
		},
		GPUResources: []v1alpha1.GPUResource{{Name: "nvidia.com/pgpu", Allocatable: 8}},
	}
}

// zeroLeaves lists the paths of zero-valued scalar fields reachable from v.
func zeroLeaves(v reflect.Value, path string) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return []string{path}
		}
		return zeroLeaves(v.Elem(), path)
	case reflect.Slice:
		// A field is covered when any element sets it.
		if v.Len() == 0 {
			return []string{path}
		}
		zeroIn := map[string]int{}
		for i := range v.Len() {
			for _, p := range zeroLeaves(v.Index(i), path) {
				zeroIn[p]++
			}
		}
		var out []string
		for p, n := range zeroIn {
			if n == v.Len() {
				out = append(out, p)
			}
		}
		return out
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[metav1.Time]() {
			if tm := v.Interface().(metav1.Time); tm.IsZero() {
				return []string{path}
			}
			return nil
		}
		var out []string
		for i := range v.NumField() {
			out = append(out, zeroLeaves(v.Field(i), path+"."+v.Type().Field(i).Name)...)
		}
		return out
	}
	if v.IsZero() {
		return []string{path}
	}
	return nil
}

func toUnstructured(t *testing.T, nr *v1alpha1.NodeReport) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(nr)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured) *v1alpha1.NodeReport {
	t.Helper()
	raw, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var nr v1alpha1.NodeReport
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nr); err != nil {
		t.Fatalf("decoding the served NodeReport into the Go type: %v", err)
	}
	return &nr
}

func nodeReport(name string, r v1alpha1.Report) *v1alpha1.NodeReport {
	return &v1alpha1.NodeReport{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Report:     r,
	}
}

// TestCRDRoundTrip checks the CRD schema and the Go types agree: a fully
// populated object is accepted with strict field validation (no field the
// schema lacks) and read back unchanged (nothing pruned or defaulted).
func TestCRDRoundTrip(t *testing.T) {
	testenv.Need(t)
	want := fullReport("roundtrip")
	if z := zeroLeaves(reflect.ValueOf(want), "Report"); len(z) > 0 {
		t.Fatalf("fullReport leaves fields zero, so the round trip would not cover them: %v", z)
	}
	dyn := dynamic.NewForConfigOrDie(env.Admin).Resource(v1alpha1.GroupVersionResource)
	// The conditions, every field set, as the agent writes them (it
	// leaves observedGeneration 0; the schema takes it all the same).
	when := metav1.NewTime(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	status := v1alpha1.NodeReportStatus{Conditions: []metav1.Condition{
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "PlatformReady", Message: "can run k3s-qemu-snp of the 1 requested platforms", LastTransitionTime: when, ObservedGeneration: 1},
		{Type: v1alpha1.ConditionInstalled, Status: metav1.ConditionTrue, Reason: "Installed", Message: "installed and proven live: k3s-qemu-snp", LastTransitionTime: when},
		{Type: v1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "NoFailure", Message: "no platform that worked here fails", LastTransitionTime: when},
	}}
	obj := nodeReport("roundtrip", want)
	obj.Status = status
	created, err := dyn.Create(ctx(t), toUnstructured(t, obj),
		metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if err != nil {
		t.Fatalf("creating a fully populated NodeReport with strict validation: %v", err)
	}
	got := fromUnstructured(t, created)
	if !apiequality.Semantic.DeepEqual(got.Status, status) {
		t.Errorf("the API server changed the conditions:\ngot  %+v\nwant %+v", got.Status, status)
	}
	// Semantic equality: times compare as instants (the decoded one is Local).
	if !apiequality.Semantic.DeepEqual(got.Report, want) {
		gj, _ := json.MarshalIndent(got.Report, "", "  ")
		wj, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("the API server changed the report:\ngot  %s\nwant %s", gj, wj)
	}
	if size := len(must(created.MarshalJSON())); size > 8<<10 {
		t.Errorf("a typical NodeReport is %d bytes, want under 8 KiB", size)
	}

	// Schema refusals: the caps and rules in the CRD are enforced.
	bad := map[string]func(r *v1alpha1.Report){
		"name differs from nodeName": func(r *v1alpha1.Report) { r.NodeName = "other" },
		"unknown verdict":            func(r *v1alpha1.Report) { r.Platforms[0].Verdict = "maybe" },
		"bad content hash":           func(r *v1alpha1.Report) { r.ContentHash = "md5:00" },
		"message too long":           func(r *v1alpha1.Report) { r.Findings[0].Message = strings.Repeat("m", v1alpha1.MaxTextLen+1) },
		"too many findings": func(r *v1alpha1.Report) {
			r.Findings = make([]v1alpha1.Finding, v1alpha1.MaxFindings+1)
			for i := range r.Findings {
				r.Findings[i] = v1alpha1.Finding{ID: "x", Status: v1alpha1.FindingWarn, Message: "m"}
			}
		},
		"duplicate platform": func(r *v1alpha1.Report) { r.Platforms[1].Name = r.Platforms[0].Name },
	}
	badStatus := map[string]func(s *v1alpha1.NodeReportStatus){
		"condition status not True, False or Unknown": func(s *v1alpha1.NodeReportStatus) { s.Conditions[0].Status = "Yes" },
		"condition reason not CamelCase":              func(s *v1alpha1.NodeReportStatus) { s.Conditions[0].Reason = "not ready" },
		"duplicate condition type":                    func(s *v1alpha1.NodeReportStatus) { s.Conditions[1].Type = s.Conditions[0].Type },
	}
	for name, mutate := range badStatus {
		t.Run(name, func(t *testing.T) {
			o := nodeReport("refused", fullReport("refused"))
			o.Status = *status.DeepCopy()
			mutate(&o.Status)
			_, err := dyn.Create(ctx(t), toUnstructured(t, o),
				metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict, DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsInvalid(err) {
				t.Errorf("want an Invalid error, got %v", err)
			}
		})
	}
	for name, mutate := range bad {
		t.Run(name, func(t *testing.T) {
			r := fullReport("refused")
			mutate(&r)
			_, err := dyn.Create(ctx(t), toUnstructured(t, nodeReport("refused", r)),
				metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict, DryRun: []string{metav1.DryRunAll}})
			if !apierrors.IsInvalid(err) {
				t.Errorf("want an Invalid error, got %v", err)
			}
		})
	}
	t.Run("unknown field", func(t *testing.T) {
		u := toUnstructured(t, nodeReport("refused", fullReport("refused")))
		if err := unstructured.SetNestedField(u.Object, "x", "report", "surprise"); err != nil {
			t.Fatal(err)
		}
		_, err := dyn.Create(ctx(t), u, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict, DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "surprise") {
			t.Errorf("want a strict-validation error naming the field, got %v", err)
		}
	})

	// kubectl prints the printer columns.
	out := kubectl(t, "get", "nodereports", "roundtrip")
	lines := strings.SplitN(out, "\n", 3)
	if head := strings.Fields(lines[0]); !reflect.DeepEqual(head, []string{"NAME", "NODE", "READY", "NOTREADY", "INSTALLED", "AGE"}) {
		t.Errorf("kubectl get nodereports columns = %v, want NAME NODE READY NOTREADY INSTALLED AGE\n%s", head, out)
	}
	if row := strings.Fields(lines[1]); len(row) < 5 || row[4] != "True" {
		t.Errorf("kubectl get nodereports: the INSTALLED column does not show the Installed condition's status:\n%s", out)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func createNode(t *testing.T, cs kubernetes.Interface, name string, labels map[string]string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Create(ctx(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating node %s: %v", name, err)
	}
	return n
}

// applyReport writes a NodeReport with server-side apply as the agent does.
func applyReport(c context.Context, cfg *rest.Config, name string, owner *corev1.Node) error {
	return applyReportOpts(c, cfg, name, owner, nil)
}

func applyReportOpts(c context.Context, cfg *rest.Config, name string, owner *corev1.Node, dryRun []string) error {
	nr := nodeReport(name, fullReport(name))
	if owner != nil {
		nr.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: owner.Name, UID: owner.UID}}
	}
	raw, err := json.Marshal(nr)
	if err != nil {
		return err
	}
	force := true
	_, err = dynamic.NewForConfigOrDie(cfg).Resource(v1alpha1.GroupVersionResource).Patch(c, name, types.ApplyPatchType, raw,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &force, FieldValidation: metav1.FieldValidationStrict, DryRun: dryRun})
	return err
}

// applyNodeLabels sets labels on a Node with server-side apply.
func applyNodeLabels(c context.Context, cfg *rest.Config, node string, labels map[string]string) error {
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": node, "labels": labels},
	})
	if err != nil {
		return err
	}
	force := true
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().Patch(c, node, types.ApplyPatchType, raw,
		metav1.PatchOptions{FieldManager: v1alpha1.FieldManager, Force: &force})
	return err
}

// mergePatchNode sends a JSON merge patch to a Node.
func mergePatchNode(c context.Context, cfg *rest.Config, node, patch string) error {
	_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().Patch(c, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// TestAgentConfinement checks RBAC and the ValidatingAdmissionPolicy
// together: the agent on node A may write its own NodeReport and its own
// berth.dev/ labels and nothing else.
func TestAgentConfinement(t *testing.T) {
	testenv.Need(t)
	installBase(t)
	admin := testenv.Clientset(t, env.Admin)
	nodeA := createNode(t, admin, "node-a", map[string]string{"kubernetes.io/hostname": "node-a"})
	createNode(t, admin, "node-b", map[string]string{"kubernetes.io/hostname": "node-b"})
	if err := applyReport(ctx(t), env.Admin, "node-b", nil); err != nil {
		t.Fatalf("admin creating node-b's report: %v", err)
	}
	agentA := env.AsAgent("node-a")
	noNode := env.AsAgent("")
	stranger := env.AsServiceAccount(testenv.AgentNamespace, "someone-else", "node-a")
	dynA := dynamic.NewForConfigOrDie(agentA).Resource(v1alpha1.GroupVersionResource)

	tests := []accessCase{
		{"apply own NodeReport", func(c context.Context) error { return applyReport(c, agentA, "node-a", nodeA) }, true, ""},
		{"apply own NodeReport again (update)", func(c context.Context) error { return applyReport(c, agentA, "node-a", nodeA) }, true, ""},
		{"apply own berth.dev/ labels", func(c context.Context) error {
			return applyNodeLabels(c, agentA, "node-a", map[string]string{"berth.dev/kvm": "true", "berth.dev/platform.k3s-qemu-none": "true"})
		}, true, ""},
		{"remove own berth.dev/ label", func(c context.Context) error {
			return applyNodeLabels(c, agentA, "node-a", map[string]string{"berth.dev/kvm": "true"})
		}, true, ""},
		{"read other NodeReport", func(c context.Context) error {
			_, err := dynA.Get(c, "node-b", metav1.GetOptions{})
			return err
		}, true, ""},
		{"apply other node's NodeReport", func(c context.Context) error { return applyReport(c, agentA, "node-b", nil) }, false, "may only write the nodereports named node-a, not node-b"},
		{"create a NodeReport for a node that does not exist", func(c context.Context) error { return applyReport(c, agentA, "node-z", nil) }, false, "not node-z"},
		{"delete other node's NodeReport", func(c context.Context) error { return dynA.Delete(c, "node-b", metav1.DeleteOptions{}) }, false, "may only write the nodereports named node-a"},
		{"label other node under berth.dev/", func(c context.Context) error {
			return applyNodeLabels(c, agentA, "node-b", map[string]string{"berth.dev/kvm": "true"})
		}, false, "may only write the nodes named node-a, not node-b"},
		{"add a non-berth label to own node", func(c context.Context) error {
			return mergePatchNode(c, agentA, "node-a", `{"metadata":{"labels":{"node-role.kubernetes.io/tee":""}}}`)
		}, false, "only add, change or remove node labels under berth.dev/"},
		{"change a non-berth label on own node", func(c context.Context) error {
			return mergePatchNode(c, agentA, "node-a", `{"metadata":{"labels":{"kubernetes.io/hostname":"evil"}}}`)
		}, false, "only add, change or remove node labels under berth.dev/"},
		{"remove a non-berth label from own node", func(c context.Context) error {
			return mergePatchNode(c, agentA, "node-a", `{"metadata":{"labels":{"kubernetes.io/hostname":null}}}`)
		}, false, "only add, change or remove node labels under berth.dev/"},
		{"annotate own node", func(c context.Context) error {
			return mergePatchNode(c, agentA, "node-a", `{"metadata":{"annotations":{"berth.dev/x":"y"}}}`)
		}, false, "spec, annotations, finalizers and owners must not change"},
		{"cordon own node", func(c context.Context) error {
			return mergePatchNode(c, agentA, "node-a", `{"spec":{"unschedulable":true}}`)
		}, false, "spec, annotations, finalizers and owners must not change"},
		{"taint own node", func(c context.Context) error {
			return mergePatchNode(c, agentA, "node-a", `{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}`)
		}, false, "spec, annotations, finalizers and owners must not change"},
		{"delete own node", func(c context.Context) error {
			return kubernetes.NewForConfigOrDie(agentA).CoreV1().Nodes().Delete(c, "node-a", metav1.DeleteOptions{})
		}, false, "cannot delete resource"},
		{"token without node binding writes a report", func(c context.Context) error { return applyReport(c, noNode, "node-a", nodeA) }, false, "node-bound service-account token"},
		{"token without node binding labels a node", func(c context.Context) error {
			return applyNodeLabels(c, noNode, "node-a", map[string]string{"berth.dev/kvm": "false"})
		}, false, "node-bound service-account token"},
		{"another service account", func(c context.Context) error { return applyReport(c, stranger, "node-a", nodeA) }, false, "cannot patch resource"},
		{"delete own NodeReport", func(c context.Context) error { return dynA.Delete(c, "node-a", metav1.DeleteOptions{}) }, true, ""},
	}
	runAccessCases(t, tests)

	// What the agent did to node-a: only its own labels, manager berth-agent.
	n, err := admin.CoreV1().Nodes().Get(ctx(t), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"kubernetes.io/hostname": "node-a", "berth.dev/kvm": "true"}; !reflect.DeepEqual(n.Labels, want) {
		t.Errorf("node-a labels = %v, want %v", n.Labels, want)
	}
	if !reflect.DeepEqual(n.Spec, nodeA.Spec) || len(n.Annotations) > 0 {
		t.Errorf("node-a changed beyond labels: spec %+v (was %+v), annotations %v", n.Spec, nodeA.Spec, n.Annotations)
	}
}

// TestGarbageCollection checks that a NodeReport owned by its Node goes
// away with the Node (kube-controller-manager's garbage collector).
func TestGarbageCollection(t *testing.T) {
	testenv.Need(t)
	admin := testenv.Clientset(t, env.Admin)
	n := createNode(t, admin, "node-gc", nil)
	if err := applyReport(ctx(t), env.Admin, "node-gc", n); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().Nodes().Delete(ctx(t), "node-gc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(env.Admin).Resource(v1alpha1.GroupVersionResource)
	err := wait.PollUntilContextTimeout(ctx(t), 200*time.Millisecond, 45*time.Second, true, func(c context.Context) (bool, error) {
		_, err := dyn.Get(c, "node-gc", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	if err != nil {
		t.Fatalf("the NodeReport of a deleted node was not garbage collected: %v", err)
	}
}
