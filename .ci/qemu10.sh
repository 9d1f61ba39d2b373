#!/usr/bin/env bash
# Unpacks QEMU 10 (Debian bookworm-backports' qemu-system-x86 10.0.2) into
# ${BERTH_CACHE}/qemu-<version>/ for the refvalues tests that ask QEMU >= 10
# what it hands the firmware (internal/node/refvalues, vectors-rtmr.psv),
# and appends BERTH_QEMU10 (a wrapper that runs it with its own data
# files) to the env file given as $1 (default .ci/tools.env).
#
# The system QEMU (Debian 12's 7.2, which other tests need) is left alone:
# the .debs are fetched with `apt-get download` through a private apt
# configuration (its own sources list, lists and cache under the cache
# directory; /etc/apt is not touched), checked against the SHA-256 pinned
# here and unpacked with dpkg-deb -x, not installed. The binary's shared
# libraries are bookworm's, installed with Debian's qemu-system-x86.
# Debian builds QEMU with absolute data paths (/usr/share/qemu, 7.2's), so
# the wrapper puts the 10.0 data files and SeaBIOS first with -L.
# Idempotent: a second run only checks the wrapper.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${BERTH_CACHE:-$HOME/.cache/berth}"
envfile="${1:-.ci/tools.env}"
ver=10.0.2
dir="$cache/qemu-$ver"
# package=version sha256 (bookworm-backports, main, amd64/all).
debs=(
  "qemu-system-x86=1:10.0.2+ds-2+deb13u1~bpo12+1 4a6b1856c8b0d7df4ff8e70249e12c473ccf8d516aadb4ae14d3d938faed0c65"
  "qemu-system-data=1:10.0.2+ds-2+deb13u1~bpo12+1 2d831088187087013b3fcbd19bdfb955b182a2d5a08f6dafa0ad1c6d2007fb4e"
  "seabios=1.16.3-2~bpo12+1 48390d0a534c66d11789e39518aa219773a9d3677b29fe1af8799dfb563ec713"
)
mkdir -p "$cache"
exec 9>"$cache/.qemu-$ver.lock"
flock 9   # concurrent tools.sh runs wait here instead of fetching twice
if [ ! -x "$dir/qemu-system-x86_64" ]; then
  echo "qemu10.sh: fetching QEMU $ver from bookworm-backports" >&2
  work=$(mktemp -d "${TMPDIR:-/tmp}/berth-qemu10.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs" "$work/root"
  echo "deb http://deb.debian.org/debian bookworm-backports main" > "$work/sources.list"
  apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
       -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1
       -o APT::Sandbox::User=root)
  apt-get "${apt[@]}" -qq update
  pkgs=()
  for d in "${debs[@]}"; do pkgs+=("${d%% *}"); done
  (cd "$work/debs" && apt-get "${apt[@]}" -qq download "${pkgs[@]}")
  for d in "${debs[@]}"; do
    spec=${d%% *} sum=${d##* }
    name=${spec%%=*} v=${spec#*=}
    f=$(ls "$work/debs/${name}_"*.deb)
    echo "$sum  $f" | sha256sum -c --quiet - || { echo "qemu10.sh: $name $v: SHA-256 differs from the pinned one" >&2; exit 1; }
    dpkg-deb -x "$f" "$work/root"
  done
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  mv "$work/root" "$dir.tmp/root"
  cat > "$dir.tmp/qemu-system-x86_64" <<'EOF'
#!/bin/sh
# QEMU 10.0.2 from bookworm-backports, unpacked by .ci/qemu10.sh, with its
# own data files and SeaBIOS ahead of the system QEMU's.
d=$(dirname "$0")/root
exec "$d/usr/bin/qemu-system-x86_64" -L "$d/usr/share/qemu" -L "$d/usr/share/seabios" "$@"
EOF
  chmod +x "$dir.tmp/qemu-system-x86_64"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
fi
"$dir/qemu-system-x86_64" --version | grep -q "^QEMU emulator version $ver " || { echo "qemu10.sh: $dir does not run as QEMU $ver" >&2; exit 1; }
echo "export BERTH_QEMU10=$dir/qemu-system-x86_64" >> "$envfile"
