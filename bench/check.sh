#!/usr/bin/env bash
# Measures `berth check` (every platform of the host's distribution) on the
# live machine: median wall time of N runs (default 30) without and with the
# QEMU functional probe, and max RSS. Budgets: --no-probe median < 30 ms and
# RSS < 25 MiB; with the probe < 500 ms.
# Usage: bench/check.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n="${1:-30}"
dir="$(mktemp -d)"; bin="$dir/berth"
trap 'rm -rf "$dir"' EXIT
go build -o "$bin" ./cmd/berth
run() { median_ms "$n" "$bin" check --all "$@"; } # median wall ms
noprobe=$(run --no-probe)
probe=$(run --probe)
maxrss() { /usr/bin/time -o "$dir/rss" -f '%M' "$bin" check "$@" >/dev/null 2>&1 || true; tail -1 "$dir/rss"; }
echo "berth check --all (live, $n runs): median ${noprobe} ms --no-probe, ${probe} ms with the QEMU probe"
echo "max RSS: $(maxrss --all --no-probe) KiB live --all incl. commands run; berth alone on a fixture root: $(maxrss --all --root testdata/hosts/snp-genoa-k3s-ready) KiB --all, $(maxrss --root testdata/hosts/snp-genoa-k3s-ready) KiB for the host's own distribution"
