//go:build tools

// Package tools pins Helm, which the chart tests in deploy/ run (helm lint,
// helm template, helm install), built by .ci/helm.sh. It is a module of its
// own so that Helm's large dependency tree (client-go, the Kubernetes API
// machinery at Helm's own versions, ORAS, ...) never enters the berth module
// or the Kubernetes tools module.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
