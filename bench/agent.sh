#!/usr/bin/env bash
# `berth agent` side by side with NFD's nfd-worker over a long run against
# one real kube-apiserver (KUBEBUILDER_ASSETS, from .ci/tools.env), on this
# machine's own root, both live, both with the same report interval:
#   - QUIET intervals (default 60) with nothing changing on the host, then
#   - CHANGING intervals (default 60) in which the OS version (os-release's
#     VERSION_ID and PRETTY_NAME, as an upgrade leaves them)
#     changes every CHANGE_EVERY intervals (default 3), a fact both publish;
# and prints the Markdown table of bench/RESULTS.md: RSS (peak and steady),
# CPU per interval (user+system, children included, from /proc/<pid>/stat)
# and API requests per interval (reads, writes: the API server's audit log,
# by user agent), with berth/nfd ratios.
#
# Each runs with the privileges its DaemonSet gives it (AS=daemonset, the
# default): uid 0, berth's agent with SYS_CHROOT only, nfd-worker with no
# capability (setpriv); AS=root gives both every capability of root.
# Both run at the same time, so load from other processes hits both alike.
# The host is not modified: the run happens in a private mount namespace
# (unshare -m) in which a copy of /etc/os-release is bind-mounted over it.
#
# nfd-worker is built from the Go module sigs.k8s.io/node-feature-discovery
# as bench/peers.sh builds nfd (NFD_VERSION, default v0.19.0), into
# ${BERTH_CACHE:-~/.cache/berth}/bin/nfd-worker-<version>; its NodeFeature
# CRD comes from the same module. It runs without nfd-master (v0.19 workers
# write NodeFeature objects; labelling the Node is nfd-master's job, which
# berth's agent does itself, so the comparison leaves out a cost NFD has).
#
# Needs root (unshare, mount). Usage:
#   bench/agent.sh [INTERVAL] [QUIET] [CHANGING]      (defaults: 2s 60 60)
set -euo pipefail
cd "$(dirname "$0")/.."
interval="${1:-2s}"
quiet="${2:-60}"
changing="${3:-60}"
change_every="${CHANGE_EVERY:-3}"
ver="${NFD_VERSION:-v0.19.0}"
cache="${BERTH_CACHE:-$HOME/.cache/berth}"
# shellcheck disable=SC1091
[ -f .ci/tools.env ] && . .ci/tools.env
if [ "$(id -u)" != 0 ]; then echo "agent.sh: needs root (unshare -m, mount --bind)" >&2; exit 1; fi
: "${KUBEBUILDER_ASSETS:?run . .ci/tools.env (built by .ci/tools.sh)}"
work="$(mktemp -d "${TMPDIR:-/tmp}/berth-agent-bench.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache/bin"

mod=sigs.k8s.io/node-feature-discovery
moddir() { (cd "$work" && GOFLAGS= go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p'); }
src=$(moddir "$mod@$ver")
[ -n "$src" ] || { echo "agent.sh: go mod download $mod@$ver gave no directory" >&2; exit 1; }
nfd="$cache/bin/nfd-worker-$ver"
if [ ! -x "$nfd" ]; then
  # As peers.sh builds nfd: the module zip leaves out the nested API
  # module its go.mod replaces, so it is put back in place first; linked
  # as NFD's Makefile links its release binaries.
  echo "agent.sh: building nfd-worker $ver (minutes on a cold cache)" >&2
  api=$(moddir "$mod/api/nfd@$ver")
  cp -R "$src" "$work/nfd" && chmod -R u+w "$work/nfd"
  rm -rf "$work/nfd/api/nfd" && cp -R "$api" "$work/nfd/api/nfd" && chmod -R u+w "$work/nfd/api/nfd"
  (cd "$work/nfd" && GOFLAGS= go build -buildvcs=false -mod=mod \
    -ldflags "-s -w -X $mod/pkg/version.version=$ver" -o "$nfd.tmp" ./cmd/nfd-worker)
  mv "$nfd.tmp" "$nfd"
  rm -rf "$work/nfd"
fi

# berth-cluster as `make build` builds it (berth agent runs it). Both
# binaries run from copies install(1) wrote (see peers.sh, Method).
make -s build BIN="$work/build/berth" >/dev/null
go build -o "$work/footprint" ./bench/cmd/footprint
mkdir -p "$work/bin"
install -m 0755 "$work/build/berth-cluster" "$work/bin/berth-cluster"
install -m 0755 "$nfd" "$work/bin/nfd-worker"

cp --dereference /etc/os-release "$work/os-release"
echo "machine: $(nproc) CPUs, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nfd-worker $ver ($mod), berth $("$work/bin/berth-cluster" version 2>/dev/null | head -1 || echo '?')"
(while sleep 5; do cut -d' ' -f1 /proc/loadavg; done >"$work/load") &
loadpid=$!
unshare -m --propagation private bash -c '
  mount --bind "$1" /etc/os-release
  shift
  exec "$@"' _ "$work/os-release" \
  "$work/footprint" -berth "$work/bin/berth-cluster" -nfd "$work/bin/nfd-worker" \
  -crd deploy/base/crd-nodereport.yaml -crd "$src/deployment/base/nfd-crds/nfd-api-crds.yaml" \
  -as "${AS:-daemonset}" -os-release "$work/os-release" -interval "$interval" -quiet "$quiet" -changing "$changing" -change-every "$change_every"
kill "$loadpid" 2>/dev/null || true
sort -n "$work/load" | awk 'NR==1{lo=$1} {hi=$1} END {print "1-minute load average during the run: " lo "-" hi}'
