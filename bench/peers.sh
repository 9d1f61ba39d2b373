#!/usr/bin/env bash
# berth side by side with the tools it is compared with, in one run on this
# machine, printing one Markdown table: bench/RESULTS.md shows that
# table and nothing measured otherwise.
#
# Peers, installed or built the same way on every machine:
#   - a Go hello world (fmt.Println), built here with the same toolchain:
#     the floor of any Go command's start-up;
#   - `nfd export features` from Node Feature Discovery, the Go module
#     sigs.k8s.io/node-feature-discovery built into the tools cache
#     (${BERTH_CACHE:-~/.cache/berth}/bin/nfd-<version>) as .ci/tools.sh
#     builds containerd; NFD_VERSION picks the version, else the newest of
#     the last NFD_TRIES (4) the module proxy lists that downloads and
#     builds with this Go, else NFD_PINNED below; it says which was used;
#   - `virt-host-validate qemu` from Debian's libvirt-clients (apt).
#
# Method: every command runs RUNS times (default 45) after 3 warm-up runs,
# interleaved: each round runs all commands once, in an order shuffled per
# round, so a burst of load from another process hits both sides of a
# ratio alike. Wall time is a python3 perf_counter around the process (no
# shell in between); max RSS is GNU time's %M (apt package time), from
# RSS_RUNS (default 5) further interleaved rounds run under /usr/bin/time,
# and covers the commands a process waits for. The 1-minute load average is
# sampled every half second during the run; its range is printed with the
# table, since the machine may be shared.
#
# P2b runs berth on two generated hosts (bench/benchhost: a large node
# with 4,096 PCI functions and a base one, generated into a temporary
# directory) as offline --root directories, so that the difference is the
# PCI discovery alone.
#
# Usage: bench/peers.sh [RUNS]      (make bench runs it through bench/run.sh)
#        BERTH_BIN=/path/to/berth bench/peers.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-45}"
rss_runs="${RSS_RUNS:-5}"
cache="${BERTH_CACHE:-$HOME/.cache/berth}"
mkdir -p "$cache/bin"
work="$(mktemp -d "${TMPDIR:-/tmp}/berth-peers.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Newest NFD release the module proxy served when this was written
# (2026-11-25).
NFD_PINNED=v0.19.0

need_debs() {
  local pkgs=()
  command -v virt-host-validate >/dev/null || pkgs+=(libvirt-clients)
  [ -x /usr/bin/time ] || pkgs+=(time)
  command -v python3 >/dev/null || pkgs+=(python3)
  ((${#pkgs[@]})) || return 0
  if [ "$(id -u)" != 0 ]; then
    echo "peers.sh: need root to install: ${pkgs[*]}" >&2; exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
}

# nfd_candidates: the NFD versions to try, newest first, one a line:
# NFD_VERSION alone when it is set (it pins: no fallback), else the newest
# NFD_TRIES (default 4) releases the proxy lists, then NFD_PINNED. A listed
# release need not build here: v0.20.1 requires go >= 1.27, and `go mod
# download` with GOTOOLCHAIN=local then reports an error and no directory.
nfd_candidates() {
  if [ -n "${NFD_VERSION:-}" ]; then echo "$NFD_VERSION"; return; fi
  { (cd "$work" && GOFLAGS= go list -m -versions sigs.k8s.io/node-feature-discovery 2>/dev/null |
      tr ' ' '\n' | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sort -rV | head -n "${NFD_TRIES:-4}" || true)
    echo "$NFD_PINNED"; } | awk '!seen[$0]++'
}

# module_dir MOD@VER -> the module's directory in the module cache on
# stdout; on failure the reason (the "Error" of go mod download -json) on
# stderr and exit status 1.
module_dir() {
  local json dir
  json=$(cd "$work" && GOFLAGS= go mod download -json "$1" 2>&1 || true)
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then
    sed -n '/^[[:space:]]*"Error": "/{s/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/; s/\\u003e/>/g; s/\\u003c/</g; s/\\n\\t/ /g; p;}' <<<"$json" | head -n1 >&2
    return 1
  fi
  echo "$dir"
}

# build_nfd VERSION -> path, linked as NFD's Makefile links its release
# binaries (-s -w, version stamped). The module's go.mod replaces its API
# module with ./api/nfd, a nested module that the proxy serves on its own
# and that the module zip leaves out: it is put back in place first.
# Exit status 2 (nothing built) when either module does not download.
build_nfd() {
  local ver=$1 mod=sigs.k8s.io/node-feature-discovery out="$cache/bin/nfd-$1"
  if [ ! -x "$out" ]; then
    local start=$SECONDS src api why
    why=$(mktemp "$work/why.XXXXXX")
    if ! src=$(module_dir "$mod@$ver" 2>"$why") || ! api=$(module_dir "$mod/api/nfd@$ver" 2>"$why"); then
      echo "peers.sh: nfd $ver does not download here: $(cat "$why")" >&2
      return 2
    fi
    echo "peers.sh: building nfd $ver from $mod@$ver (minutes on a cold cache)" >&2
    rm -rf "$work/nfd"
    cp -R "$src" "$work/nfd"
    chmod -R u+w "$work/nfd"
    rm -rf "$work/nfd/api/nfd"
    cp -R "$api" "$work/nfd/api/nfd"
    chmod -R u+w "$work/nfd/api/nfd"
    (cd "$work/nfd" && GOFLAGS= go build -buildvcs=false -mod=mod \
      -ldflags "-s -w -X $mod/pkg/version.version=$ver" -o "$out.tmp" ./cmd/nfd)
    mv "$out.tmp" "$out"
    rm -rf "$work/nfd"
    echo "peers.sh: nfd $ver built in $((SECONDS - start))s" >&2
  fi
  echo "$out"
}

# pick_nfd -> the path of the newest candidate that is built or builds;
# says which version is used (the table names it: PEERS_NFD_VERSION).
# A build that fails for another reason than a download stops the run.
pick_nfd() {
  local ver out rc tried=()
  while read -r ver; do
    # Not `|| rc=$?`, which would switch -e off inside build_nfd.
    set +e
    out=$(set -e; build_nfd "$ver")
    rc=$?
    set -e
    if ((rc == 0)); then
      echo "peers.sh: nfd $ver is used${tried[*]:+ (${tried[*]} did not download)}" >&2
      echo "$out"; return 0
    fi
    ((rc == 2)) || return "$rc"
    tried+=("$ver")
  done < <(nfd_candidates)
  echo "peers.sh: no NFD version downloads here (tried ${tried[*]}); NFD_VERSION picks another" >&2
  return 1
}

need_debs
nfd=$(pick_nfd)

# The hello world lives outside berth's module so that nothing of berth's
# go.mod reaches it.
mkdir -p "$work/hello"
printf 'module hello\n\ngo 1.26\n' >"$work/hello/go.mod"
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello, world") }\n' >"$work/hello/main.go"
(cd "$work/hello" && GOFLAGS= go build -o "$work/build/hello-world" .)

# berth as `make build` builds it, both binaries side by side; or
# BERTH_BIN, a berth built elsewhere (with berth-cluster beside it), to
# compare builds.
if [ -n "${BERTH_BIN:-}" ]; then
  built="$BERTH_BIN"
else
  make -s build BIN="$work/build/berth" >/dev/null
  built="$work/build/berth"
fi

# Every Go-built command runs from a copy that install(1) wrote, as a
# node's binaries are written: by its package manager, an image's
# extraction or an installer, with write(2). The Go linker writes its
# output through a shared mapping instead, and the page cache then keeps
# the file in a form that every start pays for: on the build machine
# (kernel 6.18, ext4) `berth version` took 5.7 ms from the linker's file
# and 4.2 ms from a copy, the hello world 3.1 and 2.8 ms, nfd 43.9 and
# 38.8 ms. virt-host-validate comes from its Debian package, written by
# dpkg. Copying all of them measures each as a node would run it.
mkdir -p "$work/bin"
install -m 0755 "$work/build/hello-world" "$work/bin/hello-world"
install -m 0755 "$nfd" "$work/bin/$(basename "$nfd")"
install -m 0755 "$built" "$work/bin/berth"
install -m 0755 "$(dirname "$built")/berth-cluster" "$work/bin/berth-cluster"
nfd_built="$nfd"
nfd="$work/bin/$(basename "$nfd")"
berth="$work/bin/berth"

go run ./bench/cmd/benchhost -o "$work/hosts/large" -variant large >/dev/null
go run ./bench/cmd/benchhost -o "$work/hosts/base" -variant base >/dev/null

# What the table says besides times.
all_json=$("$berth" check --all --no-probe -o json 2>/dev/null | wc -c || true)
npci_large=$("$berth" facts -o json --root "$work/hosts/large" | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("pci") or []))')
npci_base=$("$berth" facts -o json --root "$work/hosts/base" | python3 -c 'import json,sys; print(len(json.load(sys.stdin).get("pci") or []))')
kvm=no; [ -r /dev/kvm ] && [ -w /dev/kvm ] && kvm=yes
# P3: berth probes the QEMU that the platform's configuration runs (under
# /opt/berth or /opt/kata once installed); on a build machine without
# them, the distribution's QEMU (qemu-system-x86, which .ci/tools.sh
# installs) is probed instead, so that the probe runs at all.
probe_args=""
if [ -x /usr/bin/qemu-system-x86_64 ] && "$berth" check --help 2>/dev/null | grep -q -- '--hypervisor-path'; then
  probe_args="--hypervisor-path /usr/bin/qemu-system-x86_64"
fi

export PEERS_RUNS="$runs" PEERS_RSS_RUNS="$rss_runs" PEERS_ALL_JSON="$all_json" \
  PEERS_NPCI_LARGE="$npci_large" PEERS_NPCI_BASE="$npci_base" PEERS_KVM="$kvm" PEERS_PROBE_ARGS="$probe_args" \
  PEERS_NFD_VERSION="$(basename "$nfd_built")" PEERS_VHV_VERSION="$(dpkg-query -W -f '${Version}' libvirt-clients 2>/dev/null || echo '?')"
python3 bench/peers.py \
  hello="$work/bin/hello-world" \
  version="$berth version" \
  facts="$berth facts -o json" \
  nfd="$nfd export features" \
  check="$berth check --no-probe" \
  vhv="virt-host-validate qemu" \
  checkjson="$berth check --no-probe -o json" \
  all="$berth check --all --no-probe -o json" \
  large="$berth facts -o json --root $work/hosts/large" \
  base="$berth facts -o json --root $work/hosts/base" \
  probe="$berth check $probe_args" \
  delegated="$berth runtimeclasses --help" \
  direct="$(dirname "$berth")/berth-cluster runtimeclasses --help"
