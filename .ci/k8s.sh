#!/usr/bin/env bash
# Builds the Kubernetes control plane the cluster-mode integration tests run
# (kube-apiserver, kube-controller-manager, kubectl and etcd) and the node the
# real-node tests run (kube-scheduler and kubelet) from the Go modules pinned
# in tools/k8s, into ${BERTH_CACHE}/bin/k8s-<version>/, and appends
# KUBEBUILDER_ASSETS (the directory envtest reads) to .ci/tools.env. The
# node's runc shim is built with its containerd by .ci/tools.sh.
# Binaries already present are not rebuilt: a cold build of all six takes
# some 20 minutes on two cores (kube-apiserver is most of it; 2.5 GB peak
# while linking); a warm run only checks that the files exist. All are
# static (CGO_ENABLED=0), as upstream's release builds are.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${BERTH_CACHE:-$HOME/.cache/berth}"
envfile="${1:-.ci/tools.env}"
mod=tools/k8s
k8sver=$(cd "$mod" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' k8s.io/kubernetes)
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

# name=package of each binary. They are built by one go build, which
# compiles their shared packages once and overlaps one binary's link (a
# single thread, up to a minute for kube-apiserver) with the compiling or
# linking of another; built one after another, each link left a core
# idle. etcd gets the Kubernetes version flags too: they name packages it
# does not link, which the linker ignores.
bins=(
  etcd=go.etcd.io/etcd/server/v3
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
  kubectl=k8s.io/kubernetes/cmd/kubectl
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
  kubelet=k8s.io/kubernetes/cmd/kubelet
)
names=() pkgs=()
for b in "${bins[@]}"; do
  [ -x "$dir/${b%%=*}" ] || { names+=("${b%%=*}"); pkgs+=("${b#*=}"); }
done
if ((${#pkgs[@]})); then
  echo "k8s.sh: building ${names[*]} (slow on a cold cache)" >&2
  start=$SECONDS
  # Into a directory of its own, each binary named after its package's
  # last element (etcd's is "server"), then moved into place whole.
  out=$(mktemp -d "$dir/.build.XXXXXX")
  trap 'rm -rf "$out"' EXIT
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$kldflags" -o "$out/" "${pkgs[@]}")
  for i in "${!names[@]}"; do
    elem=${pkgs[$i]%/v[0-9]*}
    mv "$out/${elem##*/}" "$dir/${names[$i]}"
  done
  echo "k8s.sh: ${names[*]} built in $((SECONDS - start))s" >&2
fi
echo "export KUBEBUILDER_ASSETS=$dir" >> "$envfile"
