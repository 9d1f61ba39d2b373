#!/usr/bin/env bash
# Builds Helm (the `helm` command the chart tests in deploy/ run: lint,
# template, install) from the Go module pinned in tools/helm into
# ${BERTH_CACHE}/bin/helm-<version>/helm, and appends BERTH_HELM (the
# binary's path) to the env file given as $1 (default .ci/tools.env).
# Built as Helm's own Makefile builds its releases: static, -trimpath, the
# version stamped into helm.sh/helm/v4/internal/version (the module cache
# holds no git data, so the commit stays empty and the tree is "clean").
# A binary already present is not rebuilt: a cold build takes a few minutes
# on two cores (see the time printed); a warm run only checks the file.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${BERTH_CACHE:-$HOME/.cache/berth}"
envfile="${1:-.ci/tools.env}"
mod=tools/helm
ver=$(cd "$mod" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' helm.sh/helm/v4)
dir="$cache/bin/helm-$ver"
mkdir -p "$dir"
# One build at a time: concurrent `make tools` runs wait here.
exec 9>"$dir/.lock"
flock 9
if [ ! -x "$dir/helm" ]; then
  echo "helm.sh: building helm $ver from helm.sh/helm/v4 (slow on a cold cache)" >&2
  start=$SECONDS
  vpkg=helm.sh/helm/v4/internal/version
  (cd "$mod" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
    -ldflags "-s -w -X $vpkg.version=$ver -X $vpkg.metadata= -X $vpkg.gitTreeState=clean" \
    -o "$dir/helm.tmp" helm.sh/helm/v4/cmd/helm)
  mv "$dir/helm.tmp" "$dir/helm"
  echo "helm.sh: helm built in $((SECONDS - start))s" >&2
fi
echo "export BERTH_HELM=$dir/helm" >> "$envfile"
