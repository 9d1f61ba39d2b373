#!/usr/bin/env bash
# Installs or builds what the test suite needs. Idempotent: a second run on a
# warm machine does nothing but check. Binaries built from Go modules are
# cached outside the clone under ${BERTH_CACHE:-~/.cache/berth}. Writes
# .ci/tools.env with the paths the tests read.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${BERTH_CACHE:-$HOME/.cache/berth}"
mkdir -p "$cache"
envfile=.ci/tools.env
: > "$envfile"

# Debian packages the tests use.
pkgs=()
[ -f /usr/share/misc/pci.ids ] || pkgs+=(pci.ids)
command -v qemu-system-x86_64 >/dev/null || pkgs+=(qemu-system-x86)
[ -x /usr/bin/containerd ] || pkgs+=(containerd)
# Headless Chromium renders the berth fleet --html page in its test.
[ -x /usr/bin/chromium ] || pkgs+=(chromium)
if ((${#pkgs[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "tools.sh: need root to install: ${pkgs[*]}" >&2; exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
echo "export BERTH_CACHE=$cache" >> "$envfile"

# containerd 2.x for the config integration tests, built from the tools
# module at the version tools/go.mod pins (config version 3); Debian's
# containerd package above is the 1.6.x one (config version 2).
ctr2_ver=$(awk '$1 == "github.com/containerd/containerd/v2" {print $2} $1 == "require" && $2 == "github.com/containerd/containerd/v2" {print $3}' tools/go.mod | head -n1)
ctr2="$cache/bin/containerd-${ctr2_ver#v}"
if [ ! -x "$ctr2" ]; then
  mkdir -p "$cache/bin"
  (cd tools && GOFLAGS=-mod=mod go build -tags no_btrfs -o "$ctr2.tmp" github.com/containerd/containerd/v2/cmd/containerd)
  mv "$ctr2.tmp" "$ctr2"
fi
echo "export BERTH_CONTAINERD1=/usr/bin/containerd" >> "$envfile"
echo "export BERTH_CONTAINERD2=$ctr2" >> "$envfile"

# Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager,
# kubectl) for the cluster-mode tests, built from tools/k8s; writes
# KUBEBUILDER_ASSETS. See .ci/k8s.sh.
BERTH_CACHE="$cache" bash .ci/k8s.sh "$envfile"
