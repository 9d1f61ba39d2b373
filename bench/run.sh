#!/usr/bin/env bash
# Runs every benchmark script in bench/ (all *.sh but this one).
set -euo pipefail
cd "$(dirname "$0")"
status=0
for s in *.sh; do
  [ "$s" = run.sh ] && continue
  echo "== bench/$s"
  bash "$s" || status=1
done
exit $status
