#!/usr/bin/env bash
# Measures `berth facts` on the live machine: builds the binary, runs it N
# times (default 30) and prints the median wall time in ms, the max RSS in
# KiB (of berth itself, and including the commands it runs) and the size
# of the facts JSON. Budgets: median < 25 ms, RSS < 20 MiB, JSON < 16 KiB.
# Usage: bench/facts.sh [N] [extra berth flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
n="${1:-30}"; shift || true
bin="$(mktemp -d)/berth"
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/berth
"$bin" facts -o json "$@" >/dev/null # warm the page cache

json_bytes=$("$bin" facts -o json "$@" | wc -c)
median_ms=$(median_ms "$n" "$bin" facts -o json "$@")
# GNU time's max RSS covers berth and any host binary it had to run for a
# version (none on a Debian host: versions come from the files and the
# package database); a fixture root runs nothing, so its RSS is berth's own.
rss_all=$( { /usr/bin/time -f '%M' "$bin" facts -o json "$@" >/dev/null; } 2>&1 | tail -1)
fixture=testdata/hosts/snp-genoa-k3s-ready
rss_self=$( { /usr/bin/time -f '%M' "$bin" facts -o json --root "$fixture" >/dev/null; } 2>&1 | tail -1)
echo "berth facts (live, $n runs): median ${median_ms} ms; max RSS ${rss_all} KiB incl. commands run, ${rss_self} KiB berth alone (fixture root); JSON ${json_bytes} bytes"
