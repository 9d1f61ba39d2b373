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
if ((${#pkgs[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "tools.sh: need root to install: ${pkgs[*]}" >&2; exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
echo "export BERTH_CACHE=$cache" >> "$envfile"
