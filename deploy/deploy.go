// Package deploy holds berth's Kubernetes manifests: base/ is a kustomize
// base (`kubectl apply -k deploy/`) with the namespace, the agent's
// ServiceAccount, RBAC, the NodeReport CRD, the ValidatingAdmissionPolicy
// that confines each agent to its own node, the agent DaemonSet, and the
// node-installer DaemonSet with its ServiceAccount, RBAC and ConfigMap.
// helm/berth is the Helm chart that renders the same objects (the package's
// tests keep the two equivalent) plus the uninstall hook and RuntimeClasses.
//
// The Go package embeds the manifests so that test harnesses and tools can
// read them without knowing where the checkout is.
package deploy

import "embed"

// CRDFile is the NodeReport CRD inside Base (generated from api/v1alpha1).
const CRDFile = "base/crd-nodereport.yaml"

// Base is the kustomize base, embedded read-only.
//
//go:embed base/*.yaml
var Base embed.FS
