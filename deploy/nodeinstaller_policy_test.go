package deploy_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"berth.dev/berth/internal/testkit/testenv"
)

// nodeEvent creates, as cfg, an Event in default about Node about, the way
// the node-installer reports a platform that is not ready.
func nodeEvent(c context.Context, cfg *rest.Config, name, about string) error {
	_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Events(metav1.NamespaceDefault).Create(c, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: about, UID: types.UID("uid-" + about)},
		Reason:         "BerthPlatformNotReady",
		Message:        "k3s-qemu-tdx: tee.tdx.cpu failed",
		Type:           corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "berth-node-installer", Host: about},
	}, metav1.CreateOptions{})
	return err
}

// TestNodeInstallerConfinement checks the node-installer's RBAC and its
// ValidatingAdmissionPolicy together: the node-installer on node A may set
// and remove its installed labels and its install status annotation on A
// and report Events about A, nothing else, although its RBAC is
// cluster-wide.
func TestNodeInstallerConfinement(t *testing.T) {
	testenv.Need(t)
	installBase(t)
	admin := testenv.Clientset(t, env.Admin)
	nodeA := createNode(t, admin, "ni-a", map[string]string{"kubernetes.io/hostname": "ni-a", "berth.dev/platform.k3s-qemu-tdx": "true"})
	createNode(t, admin, "ni-b", map[string]string{"kubernetes.io/hostname": "ni-b"})
	const sa = "berth-node-installer"
	onA := env.AsServiceAccount(testenv.AgentNamespace, sa, "ni-a")
	noNode := env.AsServiceAccount(testenv.AgentNamespace, sa, "")
	probe := env.AsServiceAccount(testenv.AgentNamespace, sa, "policy-probe")
	waitPolicy(t, sa, func(c context.Context) error {
		return mergePatchNode(c, probe, "ni-b", `{"metadata":{"labels":{"berth.dev/installed.probe":"true"}}}`)
	})
	waitPolicy(t, sa+"-events", func(c context.Context) error { return nodeEvent(c, probe, "ni-b.berth-probe", "ni-b") })
	// The startup taint (the base's key) and two others, one with the
	// same key: kubelet's --register-with-taints and other controllers.
	const startup = `{"key":"berth.dev/runtime-not-ready","effect":"NoSchedule"}`
	const gpu = `{"key":"example.com/gpu","value":"true","effect":"NoSchedule"}`
	if err := mergePatchNode(ctx(t), env.Admin, "ni-a", `{"spec":{"taints":[`+startup+`,`+gpu+`]}}`); err != nil {
		t.Fatal(err)
	}

	tests := []accessCase{
		{"set own installed labels", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"metadata":{"labels":{"berth.dev/installed.k3s-qemu-tdx":"true","berth.dev/installed.k3s-qemu-snp":"no"}}}`)
		}, true, ""},
		{"set kata-deploy's label", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"metadata":{"labels":{"katacontainers.io/kata-runtime":"true"}}}`)
		}, true, ""},
		{"server-side apply of own labels", func(c context.Context) error {
			return applyNodeLabels(c, onA, "ni-a", map[string]string{"berth.dev/installed.k3s-qemu-none": "true"})
		}, true, ""},
		{"remove own installed labels (cleanup)", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"metadata":{"labels":{"berth.dev/installed.k3s-qemu-snp":null,"katacontainers.io/kata-runtime":null}}}`)
		}, true, ""},
		{"report an Event about own node", func(c context.Context) error { return nodeEvent(c, onA, "ni-a.berth-1", "ni-a") }, true, ""},
		// Events are create-only: the installer names an Event after its
		// node, reason and message, so a rerun's create finds it there.
		{"update own Event", func(c context.Context) error {
			events := kubernetes.NewForConfigOrDie(onA).CoreV1().Events(metav1.NamespaceDefault)
			ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ni-a.berth-1", Namespace: metav1.NamespaceDefault},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "ni-b"}, Reason: "BerthPlatformNotReady"}
			_, err := events.Update(c, ev, metav1.UpdateOptions{})
			return err
		}, false, "cannot update resource"},
		{"label another node", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-b", `{"metadata":{"labels":{"berth.dev/installed.k3s-qemu-tdx":"true"}}}`)
		}, false, "may only update the node named ni-a, not update ni-b"},
		{"change the agent's readiness label", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"metadata":{"labels":{"berth.dev/platform.k3s-qemu-tdx":"false"}}}`)
		}, false, "only add, change or remove the node labels berth.dev/installed.*"},
		{"add another label", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"metadata":{"labels":{"node-role.kubernetes.io/tee":""}}}`)
		}, false, "only add, change or remove the node labels berth.dev/installed.*"},
		{"taint own node", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"spec":{"taints":[`+startup+`,`+gpu+`,{"key":"k","effect":"NoSchedule"}]}}`)
		}, false, "may only remove the startup taint berth.dev/runtime-not-ready from its node"},
		{"remove another taint", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"spec":{"taints":[`+startup+`]}}`)
		}, false, "may only remove the startup taint berth.dev/runtime-not-ready from its node"},
		{"cordon own node", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"spec":{"unschedulable":true}}`)
		}, false, "the rest of spec, finalizers and owners must not change"},
		{"remove the startup taint and cordon", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"spec":{"taints":[`+gpu+`],"unschedulable":true}}`)
		}, false, "the rest of spec, finalizers and owners must not change"},
		{"remove the startup taint from another node", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-b", `{"spec":{"taints":null}}`)
		}, false, "may only update the node named ni-a, not update ni-b"},
		{"remove the startup taint", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"spec":{"taints":[`+gpu+`]}}`)
		}, true, ""},
		{"record own install status", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"metadata":{"annotations":{"berth.dev/install-status":"{\"schema\":1,\"platforms\":[{\"name\":\"k3s-qemu-tdx\",\"state\":\"failed\",\"error\":\"boom\"}]}"}}}`)
		}, true, ""},
		{"oversized install status", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"metadata":{"annotations":{"berth.dev/install-status":"`+strings.Repeat("x", 8193)+`"}}}`)
		}, false, "may be at most 8 KiB"},
		{"record install status on another node", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-b", `{"metadata":{"annotations":{"berth.dev/install-status":"{}"}}}`)
		}, false, "may only update the node named ni-a, not update ni-b"},
		{"annotate own node", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"metadata":{"annotations":{"berth.dev/x":"y"}}}`)
		}, false, "only add, change or remove the node annotation berth.dev/install-status"},
		{"remove own install status (cleanup)", func(c context.Context) error {
			return mergePatchNode(c, onA, "ni-a", `{"metadata":{"annotations":{"berth.dev/install-status":null}}}`)
		}, true, ""},
		{"report an Event about another node", func(c context.Context) error { return nodeEvent(c, onA, "ni-b.berth-1", "ni-b") }, false, "may only create or update Events about Node ni-a"},
		{"token without node binding", func(c context.Context) error {
			return mergePatchNode(c, noNode, "ni-a", `{"metadata":{"labels":{"berth.dev/installed.k3s-qemu-tdx":"no"}}}`)
		}, false, "node-bound service-account token"},
		{"delete own node", func(c context.Context) error {
			return kubernetes.NewForConfigOrDie(onA).CoreV1().Nodes().Delete(c, "ni-a", metav1.DeleteOptions{})
		}, false, "cannot delete resource"},
		{"write a NodeReport", func(c context.Context) error { return applyReport(c, onA, "ni-a", nodeA) }, false, "cannot patch resource"},
	}
	runAccessCases(t, tests)

	n, err := admin.CoreV1().Nodes().Get(ctx(t), "ni-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "example.com/gpu" || n.Spec.Unschedulable {
		t.Errorf("ni-a taints = %+v (unschedulable %v), want example.com/gpu's alone", n.Spec.Taints, n.Spec.Unschedulable)
	}
	want := map[string]string{"kubernetes.io/hostname": "ni-a", "berth.dev/platform.k3s-qemu-tdx": "true",
		"berth.dev/installed.k3s-qemu-tdx": "true", "berth.dev/installed.k3s-qemu-none": "true"}
	if len(n.Labels) != len(want) {
		t.Errorf("ni-a labels = %v, want %v", n.Labels, want)
	}
	for k, v := range want {
		if n.Labels[k] != v {
			t.Errorf("ni-a labels = %v, want %v", n.Labels, want)
			break
		}
	}
}

// patchNodeStatus sends a patch of type pt to a Node's status
// subresource, as the node-installer advertises its TEE keys (an apply)
// and kubelet reports its capacity (a strategic merge).
func patchNodeStatus(c context.Context, cfg *rest.Config, node string, pt types.PatchType, patch string) error {
	opts := metav1.PatchOptions{}
	if pt == types.ApplyPatchType {
		force := true
		opts = metav1.PatchOptions{FieldManager: "berth-node-installer", Force: &force}
	}
	_, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().Nodes().Patch(c, node, pt, []byte(patch), opts, "status")
	return err
}

// TestNodeInstallerTEEKeys checks what the node-installer may do to its
// Node's status with the RBAC the chart adds for
// nodeInstaller.advertiseTEEKeys (patch nodes/status): add, change and
// remove the TEE key extended resources in its own node's
// status.capacity, nothing else there, and nothing in another node's.
func TestNodeInstallerTEEKeys(t *testing.T) {
	testenv.Need(t)
	installBase(t)
	admin := testenv.Clientset(t, env.Admin)
	const sa = "berth-node-installer"
	createNode(t, admin, "ni-tee-a", nil)
	createNode(t, admin, "ni-tee-b", nil)
	kubelet := `{"status":{"capacity":{"cpu":"8","memory":"64Gi"},"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}]}}`
	for _, n := range []string{"ni-tee-a", "ni-tee-b"} {
		if err := patchNodeStatus(ctx(t), env.Admin, n, types.StrategicMergePatchType, kubelet); err != nil {
			t.Fatal(err)
		}
	}
	// The rule the chart renders with nodeInstaller.advertiseTEEKeys.
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "berth-node-installer-tee-keys"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx(t), role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "berth-node-installer-tee-keys"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: testenv.AgentNamespace}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx(t), binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	onA := env.AsServiceAccount(testenv.AgentNamespace, sa, "ni-tee-a")
	probe := env.AsServiceAccount(testenv.AgentNamespace, sa, "policy-probe")
	// Forbidden by the policy once it is in force (and RBAC lets it by).
	waitPolicy(t, sa, func(c context.Context) error {
		return patchNodeStatus(c, probe, "ni-tee-b", types.MergePatchType, `{"status":{"capacity":{"tdx.intel.com/keys":"31"}}}`)
	})

	apply := func(capacity string) string {
		return `{"apiVersion":"v1","kind":"Node","metadata":{"name":"ni-tee-a"},"status":{"capacity":{` + capacity + `}}}`
	}
	tests := []accessCase{
		{"advertise own TEE keys (apply)", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-a", types.ApplyPatchType, apply(`"sev-snp.amd.com/esids":"99","tdx.intel.com/keys":"31"`))
		}, true, ""},
		{"withdraw own SNP keys (apply without them)", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-a", types.ApplyPatchType, apply(`"tdx.intel.com/keys":"31"`))
		}, true, ""},
		{"change own TDX keys", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-a", types.MergePatchType, `{"status":{"capacity":{"tdx.intel.com/keys":"15"}}}`)
		}, true, ""},
		{"advertise TEE keys on another node", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-b", types.MergePatchType, `{"status":{"capacity":{"tdx.intel.com/keys":"31"}}}`)
		}, false, "may only update the node named ni-tee-a, not update ni-tee-b"},
		{"change kubelet's capacity", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-a", types.MergePatchType, `{"status":{"capacity":{"cpu":"64"}}}`)
		}, false, "only add, change or remove the extended resources sev-snp.amd.com/esids and tdx.intel.com/keys"},
		{"remove kubelet's capacity", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-a", types.MergePatchType, `{"status":{"capacity":{"memory":null}}}`)
		}, false, "only add, change or remove the extended resources sev-snp.amd.com/esids and tdx.intel.com/keys"},
		{"advertise another extended resource", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-a", types.MergePatchType, `{"status":{"capacity":{"example.com/dongle":"4"}}}`)
		}, false, "only add, change or remove the extended resources sev-snp.amd.com/esids and tdx.intel.com/keys"},
		{"set own allocatable", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-a", types.MergePatchType, `{"status":{"allocatable":{"tdx.intel.com/keys":"31"}}}`)
		}, false, "may change nothing in its node's status but the TEE key resources"},
		{"mark own node not ready", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-a", types.StrategicMergePatchType, `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Evil"}]}}`)
		}, false, "may change nothing in its node's status but the TEE key resources"},
		{"withdraw own TEE keys (remove)", func(c context.Context) error {
			return patchNodeStatus(c, onA, "ni-tee-a", types.MergePatchType, `{"status":{"capacity":{"tdx.intel.com/keys":null}}}`)
		}, true, ""},
	}
	runAccessCases(t, tests)

	n, err := admin.CoreV1().Nodes().Get(ctx(t), "ni-tee-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Status.Capacity) != 2 || n.Status.Capacity.Cpu().String() != "8" || len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Status != corev1.ConditionTrue {
		t.Errorf("ni-tee-a status after the cases: capacity %v, conditions %+v; want kubelet's alone", n.Status.Capacity, n.Status.Conditions)
	}
}
