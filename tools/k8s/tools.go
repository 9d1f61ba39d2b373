//go:build tools

// Package tools pins the Kubernetes control-plane binaries the integration
// tests run (kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
// kubelet and etcd, built by .ci/k8s.sh). It is a module of its own because k8s.io/kubernetes
// requires its staging modules at v0.0.0 (replaced below with the matching
// v0.37.x releases) and because its dependency tree must not leak into the
// berth module or into the containerd tools module.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
