package nodeinstall

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/internal/testkit/testrelease"
	"berth.dev/berth/internal/testkit/testsystemd"
	"berth.dev/berth/internal/testkit/treetest"
	"berth.dev/berth/internal/testkit/upstreamtest"
)

// env is the package's control plane (a real etcd and kube-apiserver).
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }

func dynClient(t *testing.T) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// The RBAC the agreed interface grants (deploy/ must grant no less): the
// node-installer's and the teardown Job's. Tests run them with exactly
// these rules, so a call the chart would forbid fails here too.
var (
	installerRules = []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	}
	teardownRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	}
)

// clientAs is a client for user, who may do exactly what rules allow
// (a ClusterRole bound to the user; RBAC takes a moment to apply, so it
// waits until a first allowed request passes).
func clientAs(t *testing.T, user string, rules []rbacv1.PolicyRule) dynamic.Interface {
	t.Helper()
	ctx := context.Background()
	cs := testenv.Clientset(t, env.Admin)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(env.Admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := rules[0]
	gvr := schema.GroupVersionResource{Group: r.APIGroups[0], Version: "v1", Resource: r.Resources[0]}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		if r.Verbs[0] == "get" {
			_, err = dyn.Resource(gvr).Namespace("").Get(ctx, "no-such-object", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				err = nil
			}
		} else {
			_, err = dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		}
		if err == nil {
			return dyn
		}
		if time.Now().After(deadline) {
			t.Fatalf("RBAC for %s not in effect: %v", user, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createNode creates a Node object with the given labels (set by the
// test's own field manager).
func createNode(t *testing.T, dyn dynamic.Interface, name string, labels map[string]string) {
	t.Helper()
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(node)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(nodesResource).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dyn.Resource(nodesResource).Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

func nodeLabels(t *testing.T, dyn dynamic.Interface, name string) map[string]string {
	t.Helper()
	u, err := dyn.Resource(nodesResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetLabels()
}

func nodeAnnotations(t *testing.T, dyn dynamic.Interface, name string) map[string]string {
	t.Helper()
	u, err := dyn.Resource(nodesResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetAnnotations()
}

// installRecord decodes the node's install status annotation (nil when
// there is none).
func installRecord(t *testing.T, dyn dynamic.Interface, name string) *v1alpha1.InstallStatus {
	t.Helper()
	v, ok := nodeAnnotations(t, dyn, name)[v1alpha1.InstallStatusAnnotation]
	if !ok {
		return nil
	}
	s, err := nodereport.DecodeInstall(v)
	if err != nil {
		t.Fatalf("the installer's record: %v", err)
	}
	return s
}

// platformState is the state and error recorded for one platform.
func platformState(s *v1alpha1.InstallStatus, name string) (v1alpha1.InstallState, string, string) {
	if s == nil {
		return "", "", ""
	}
	for _, p := range s.Platforms {
		if p.Name == name {
			return p.State, p.Handler, p.Error
		}
	}
	return "", "", ""
}

// nodeEvents are the Events recorded on the node, by reason.
func nodeEvents(t *testing.T, dyn dynamic.Interface, node string) map[string][]corev1.Event {
	t.Helper()
	l, err := dyn.Resource(eventsResource).Namespace(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]corev1.Event{}
	for _, u := range l.Items {
		var ev corev1.Event
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ev); err != nil {
			t.Fatal(err)
		}
		out[ev.Reason] = append(out[ev.Reason], ev)
	}
	return out
}

// copyFixture copies a fixture host into a fresh directory under the
// temporary directory (not under /etc, /var, /run or /opt, which the test
// containerd's namespace hides).
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	root := testsystemd.ShortDir(t)
	treetest.Copy(t, filepath.Join(upstreamtest.RepoRoot(t), "testdata/hosts", name), root)
	return root
}

// diffLines lists the lines only in a and only in b.
func diffLines(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for l := range ma {
		if !mb[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range mb {
		if !ma[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// testRelease is the generated release of internal/testkit/testrelease, its
// manifest pointed at the loopback mirror (UseMirror).
type testRelease = testrelease.Release

func newTestRelease(t *testing.T) *testRelease { return newTestReleaseVersion(t, "1.0.0") }

// newTestReleaseVersion is release version ver: other bytes, other digests.
func newTestReleaseVersion(t *testing.T, ver string) *testRelease {
	t.Helper()
	testkit.NeedsTools(t, "containerd-nydus-grpc (BERTH_NYDUS_SNAPSHOTTER)")
	// The real containerd-nydus-grpc, which the nydus platforms' unit
	// runs (newNode's supervisor starts it as systemd would).
	nydusBin := os.Getenv("BERTH_NYDUS_SNAPSHOTTER")
	if nydusBin == "" {
		t.Fatal("BERTH_NYDUS_SNAPSHOTTER is not set: run `make tools` (.ci/tools.sh) and source .ci/tools.env")
	}
	nydus, err := os.ReadFile(nydusBin)
	if err != nil {
		t.Fatal(err)
	}
	r := testrelease.Serve(t, testrelease.Options{Name: "kata-node-test", Version: ver, Nydus: nydus})
	UseMirror(r.Manifest, r.URL)
	return r
}

// applyLabelsObj is a server-side apply configuration of a Node's labels.
func applyLabelsObj(name string, labels map[string]string) *unstructured.Unstructured {
	l := map[string]any{}
	for k, v := range labels {
		l[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name, "labels": l},
	}}
}

// applyAs applies as another field manager (kata-deploy, say).
func applyAs(manager string) metav1.ApplyOptions {
	return metav1.ApplyOptions{FieldManager: manager, Force: true}
}

// treetestListing is the strict listing (mtimes included) of a root that
// must not have been touched at all.
func treetestListing(t *testing.T, dir string) string { return treetest.Listing(t, dir) }
