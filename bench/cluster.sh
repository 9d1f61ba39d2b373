#!/usr/bin/env bash
# Cluster-mode scale numbers against a real kube-apiserver and etcd
# (KUBEBUILDER_ASSETS from .ci/tools.env, built by .ci/tools.sh), for
# bench/RESULTS.md#cluster-scale:
#   - N simulated agents (N = each of NODES, default "100 1000 5000";
#     fixture hosts round robin, one Node each) publish, then run one
#     quiet interval: time for all to publish, API requests and response
#     bytes per agent per quiet cycle from the API server's metrics, and so
#     per node per hour at the default 10-minute interval; NodeReport sizes;
#   - the peer: NFD's own nfd-master and NFD_WORKERS (default 20) nfd-worker
#     processes (NodeFeature API), built from the Go module
#     sigs.k8s.io/node-feature-discovery (NFD_VERSION, default v0.19.0) into
#     ~/.cache/berth/bin, on a compressed timeline (sleepInterval 6 s), their
#     requests and bytes per node per hour at NFD's default 60 s interval;
#   - `berth fleet` over REPORTS NodeReports (default 5000): wall time and
#     peak RSS with /usr/bin/time -v (goals: < 1 s, < 200 MiB);
#   - the restart Lease's rollout: ROLLOUT_NODES (default 1000) simulated
#     node-installers start at once and each holds the real lock for a
#     restart scaled down to ROLLOUT_RESTART (default 150ms), at
#     maxConcurrentRestarts 1, 10 and 50: wall time against N x restart / K;
#   - the fleet analysis alone over 100,000 synthetic reports.
# Usage: bench/cluster.sh   (NODES="100 1000" REPORTS=5000 ... to change)
# A step that fails (a test's own goal check) is reported and the rest
# still run.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes="${NODES:-100 1000 5000}"
reports="${REPORTS:-5000}"
nfd_version="${NFD_VERSION:-v0.19.0}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/berth"
# shellcheck disable=SC1091
[ -f .ci/tools.env ] && . .ci/tools.env
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  echo "cluster.sh: KUBEBUILDER_ASSETS is not set: run .ci/tools.sh and source .ci/tools.env" >&2
  exit 1
fi
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
echo "-- machine: $(nproc) CPUs, $(uname -r), $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"

# build_nfd_daemons VERSION: nfd-master and nfd-worker from NFD's module,
# as bench/peers.sh builds `nfd` (its nested api module put back first);
# prints the directory holding them and the CRDs file.
build_nfd_daemons() {
  local ver=$1 mod=sigs.k8s.io/node-feature-discovery out="$cache/bin/nfd-daemons-$1"
  if [ ! -x "$out/nfd-worker" ]; then
    echo "cluster.sh: building nfd-master and nfd-worker $ver (minutes on a cold cache)" >&2
    local work src api
    work=$(mktemp -d)
    printf 'module x\n\ngo 1.26\n' >"$work/go.mod"
    src=$(cd "$work" && GOFLAGS= go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    api=$(cd "$work" && GOFLAGS= go mod download -json "$mod/api/nfd@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
    cp -R "$src" "$work/nfd" && chmod -R u+w "$work/nfd"
    rm -rf "$work/nfd/api/nfd" && cp -R "$api" "$work/nfd/api/nfd" && chmod -R u+w "$work/nfd/api/nfd"
    mkdir -p "$out.tmp"
    (cd "$work/nfd" && GOFLAGS= go build -buildvcs=false -mod=mod \
      -ldflags "-s -w -X $mod/pkg/version.version=$ver" -o "$out.tmp/" ./cmd/nfd-master ./cmd/nfd-worker)
    cp "$work/nfd/deployment/base/nfd-crds/nfd-api-crds.yaml" "$out.tmp/"
    rm -rf "$out" "$work" && mv "$out.tmp" "$out"
  fi
  echo "$out"
}

for n in $nodes; do
  echo "-- $n simulated agents (load $(cut -d' ' -f1 /proc/loadavg))"
  go test ./internal/cluster/agent/ -run 'TestFleetPublishAndQuiet$' -count=1 -timeout 60m -v -args -agents="$n" \
    | grep -E '^(BENCH|--- |FAIL|ok)' || true
done

nfd=$(build_nfd_daemons "$nfd_version")
go build -o "$cache/bin/benchcluster" ./bench/cmd/benchcluster
echo "-- NFD $nfd_version: nfd-master + ${NFD_WORKERS:-20} nfd-worker (load $(cut -d' ' -f1 /proc/loadavg))"
"$cache/bin/benchcluster" nfd -master "$nfd/nfd-master" -worker "$nfd/nfd-worker" -crds "$nfd/nfd-api-crds.yaml" \
  -workers "${NFD_WORKERS:-20}" -interval 6s -window 60s

echo "-- berth fleet over $reports NodeReports (load $(cut -d' ' -f1 /proc/loadavg))"
go test ./internal/cli/clustercmd/ -run 'TestClusterEndToEnd$' -count=1 -timeout 30m -v -args -fleet-reports="$reports" \
  | grep -E '^(BENCH|--- |    --- |FAIL|ok)|created [0-9]+ NodeReports|want under' || true

echo "-- restart Lease rollout (load $(cut -d' ' -f1 /proc/loadavg))"
"$cache/bin/benchcluster" rollout -nodes "${ROLLOUT_NODES:-1000}" -restart "${ROLLOUT_RESTART:-150ms}" -slots "${ROLLOUT_SLOTS:-1,10,50}"

echo "-- fleet analysis, 100,000 reports in memory"
go test ./internal/cluster/fleet/ -run '^$' -bench 'BenchmarkAnalyze100k$' -benchtime 5x -count=1 | grep -E '^(Benchmark|ok|FAIL)'
echo "-- done, load $(cut -d' ' -f1-3 /proc/loadavg)"
