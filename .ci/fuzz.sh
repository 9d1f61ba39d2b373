#!/usr/bin/env bash
# Runs every fuzz target in the module for the given time each (default 60s).
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-60s}"
# Minimising each new interesting input may take up to a minute by default,
# during which a worker runs no new inputs: a line-scanning target then
# spends most of its fuzz time minimising. A few seconds is enough.
m="${FUZZMINIMIZETIME:-5s}"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for f in $(grep -hoE '^func (Fuzz[A-Za-z0-9_]+)' "$dir"/*_test.go 2>/dev/null | awk '{print $2}'); do
    echo "== $pkg $f ($t)"
    go test -run='^$' -fuzz="^$f\$" -fuzztime="$t" -fuzzminimizetime="$m" "$pkg"
  done
done
