#!/usr/bin/env bash
# Builds the Kubernetes control plane the cluster-mode integration tests run
# (kube-apiserver, kube-controller-manager, kubectl and etcd) and the node the
# real-node tests run (kube-scheduler and kubelet) from the Go modules pinned
# in tools/k8s, into ${BERTH_CACHE}/bin/k8s-<version>/, and appends
# KUBEBUILDER_ASSETS (the directory envtest reads) to .ci/tools.env. The
# node's runc shim is built with its containerd by .ci/tools.sh.
# Binaries already present are not rebuilt: a cold build of kube-apiserver
# takes 10-15 minutes on two cores (2.5 GB peak while linking); kubelet and
# kube-scheduler share most of its packages and add about 3 minutes
# (45 s and 2 min measured after kube-apiserver); a warm run
# only checks that the files exist. All are static (CGO_ENABLED=0), as
# upstream's release builds are.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${BERTH_CACHE:-$HOME/.cache/berth}"
envfile="${1:-.ci/tools.env}"
mod=tools/k8s
k8sver=$(cd "$mod" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' k8s.io/kubernetes)
etcdver=$(cd "$mod" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
dir="$cache/bin/k8s-$k8sver"
mkdir -p "$dir"
# One build at a time: concurrent `make tools` runs wait here.
exec 9>"$dir/.lock"
flock 9

major=${k8sver#v}; major=${major%%.*}
minor=${k8sver#v*.}; minor=${minor%%.*}
vpkg=k8s.io/component-base/version
kldflags="-s -w -X $vpkg.gitVersion=$k8sver -X $vpkg.gitMajor=$major -X $vpkg.gitMinor=$minor -X $vpkg.gitTreeState=clean"
# client-go reports its own version to the server (kubectl version).
kldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$k8sver -X k8s.io/client-go/pkg/version.gitMajor=$major -X k8s.io/client-go/pkg/version.gitMinor=$minor"

build() { # name package ldflags
  local name=$1 pkg=$2 ldflags=$3
  [ -x "$dir/$name" ] && return 0
  echo "k8s.sh: building $name from $pkg (slow on a cold cache)" >&2
  local start=$SECONDS
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
  echo "k8s.sh: $name built in $((SECONDS - start))s" >&2
}

build etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kldflags"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kldflags"
build kubectl k8s.io/kubernetes/cmd/kubectl "$kldflags"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kldflags"
build kubelet k8s.io/kubernetes/cmd/kubelet "$kldflags"
echo "export KUBEBUILDER_ASSETS=$dir" >> "$envfile"
