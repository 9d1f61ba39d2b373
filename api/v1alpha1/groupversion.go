// Package v1alpha1 holds the berth.dev/v1alpha1 API: the cluster-scoped
// NodeReport that the berth agent publishes for each node (one object per
// node, named after the node) and that `berth fleet` reads.
//
// The report is a compact summary, not a dump: a typical node's object stays
// under 8 KiB so that a fleet of thousands of nodes can be listed cheaply.
// The limits below (MaxFindings, MaxTextLen ...) are enforced by the CRD's
// schema as well, so a writer that ignores them is refused by the API server.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of every berth resource.
	GroupName = "berth.dev"
	// Version is the API version of this package.
	Version = "v1alpha1"
	// Kind is the kind of the NodeReport object.
	Kind = "NodeReport"
	// Resource is the plural resource name of NodeReport (REST path segment).
	Resource = "nodereports"
	// FieldManager is the server-side apply field manager the agent uses; the
	// agent owns every field of its NodeReport and its berth.dev/ node labels.
	FieldManager = "berth-agent"
	// LabelPrefix is the prefix of every node label berth writes. The
	// ValidatingAdmissionPolicy in deploy/base lets an agent change only
	// labels with this prefix on its own Node.
	LabelPrefix = "berth.dev/"
	// NodeNameExtraKey is the user-info extra key that carries the node a
	// bound service-account token was issued for; the admission policy reads
	// it to confine an agent to its own Node and NodeReport.
	NodeNameExtraKey = "authentication.kubernetes.io/node-name"
)

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// GroupVersionResource is the resource NodeReports are served at, for
// dynamic clients.
var GroupVersionResource = SchemeGroupVersion.WithResource(Resource)

// SchemeBuilder registers the types of this package with a runtime.Scheme.
var SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

// AddToScheme adds NodeReport and NodeReportList to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme

// GroupResource returns the group-qualified resource for a resource name, as the
// API machinery's error helpers expect.
func GroupResource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &NodeReport{}, &NodeReportList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
