#!/usr/bin/env bash
# Cluster-mode scale numbers against a real kube-apiserver (KUBEBUILDER_ASSETS
# from .ci/tools.env, built by .ci/tools.sh):
#   - AGENTS simulated agents (default 500; fixture hosts round robin, one
#     Node each) publish, then run one quiet interval: time for all to
#     publish, API reads and writes per agent per quiet interval (writes
#     must be 0), NodeReport sizes (content target < 8 KiB);
#   - `berth fleet` over REPORTS NodeReports created directly (default
#     5000): wall time and peak RSS with /usr/bin/time -v (targets: < 2 s,
#     < 300 MiB);
#   - the fleet analysis alone over 100,000 synthetic reports (target < 3 s).
# Usage: bench/cluster.sh [AGENTS] [REPORTS]
set -euo pipefail
cd "$(dirname "$0")/.."
agents="${1:-500}"
reports="${2:-5000}"
# shellcheck disable=SC1091
[ -f .ci/tools.env ] && . .ci/tools.env
echo "-- $agents simulated agents"
go test ./internal/cluster/agent/ -run 'TestFleetPublishAndQuiet$' -count=1 -timeout 30m -v -args -agents="$agents" \
  | grep -E '^(BENCH|--- |FAIL|ok)' 
echo "-- berth fleet over $reports NodeReports"
go test ./internal/cli/clustercmd/ -run 'TestClusterEndToEnd$' -count=1 -timeout 30m -v -args -fleet-reports="$reports" \
  | grep -E '^(BENCH|--- |    --- |FAIL|ok)|created [0-9]+ NodeReports'
echo "-- fleet analysis, 100,000 reports in memory"
go test ./internal/cluster/fleet/ -run '^$' -bench 'BenchmarkAnalyze100k$' -benchtime 5x -count=1 | grep -E '^(Benchmark|ok|FAIL)'
