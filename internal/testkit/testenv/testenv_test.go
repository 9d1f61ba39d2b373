package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/v1alpha1"
)

func TestAssetsErrors(t *testing.T) {
	empty := t.TempDir()
	partial := t.TempDir()
	if err := os.WriteFile(filepath.Join(partial, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, dir, want string
	}{
		{"unset", "", "KUBEBUILDER_ASSETS is not set"},
		{"empty directory", empty, "etcd is missing"},
		{"no kube-apiserver", partial, "kube-apiserver is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(AssetsEnv, tt.dir)
			_, err := Assets()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "make tools") {
				t.Errorf("Assets() = %v, want an error with %q and the make tools hint", err, tt.want)
			}
		})
	}
}

// TestStart starts a control plane and checks what the harness promises:
// a ready API server, the NodeReport CRD served, and agent impersonation
// carrying the node-name extra the admission policy reads.
func TestStart(t *testing.T) {
	e := Start(t, Options{})
	if err := e.Healthz(t.Context()); err != nil {
		t.Fatal(err)
	}
	cs := Clientset(t, e.Admin)
	res, err := cs.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if err != nil {
		t.Fatalf("NodeReport CRD not served: %v", err)
	}
	if !slices.ContainsFunc(res.APIResources, func(r metav1.APIResource) bool { return r.Name == v1alpha1.Resource && !r.Namespaced }) {
		t.Errorf("%s not served as a cluster-scoped resource: %+v", v1alpha1.Resource, res.APIResources)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.GitVersion, "v1.") {
		t.Errorf("server version %q: built without the version ldflags?", v.GitVersion)
	}

	review, err := Clientset(t, e.AsAgent("node-a")).AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := review.Status.UserInfo
	if u.Username != "system:serviceaccount:berth-system:berth-agent" {
		t.Errorf("agent user = %q", u.Username)
	}
	if got := u.Extra[v1alpha1.NodeNameExtraKey]; len(got) != 1 || got[0] != "node-a" {
		t.Errorf("agent extra %s = %v, want [node-a]", v1alpha1.NodeNameExtraKey, got)
	}
	if !slices.Contains(u.Groups, "system:serviceaccounts:berth-system") {
		t.Errorf("agent groups = %v", u.Groups)
	}
}
