#!/usr/bin/env bash
# Installs or builds what the test suite needs. Idempotent: a second run on a
# warm machine does nothing but check. Binaries built from Go modules are
# cached outside the clone under ${BERTH_CACHE:-~/.cache/berth}. Writes
# .ci/tools.env with the paths the tests read.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${BERTH_CACHE:-$HOME/.cache/berth}"
mkdir -p "$cache/bin"
envfile=.ci/tools.env
# tools.env is collected in the cache (not in the clone, where git would
# see it for the minutes the builds take) and put in place whole at the
# end, so that a test run sourcing it meanwhile never reads half a file.
envtmp=$(mktemp "$cache/tools.env.XXXXXX")
trap 'rm -f "$envtmp" "$envfile.tmp.$$"' EXIT

# Debian packages the tests use.
pkgs=()
[ -f /usr/share/misc/pci.ids ] || pkgs+=(pci.ids)
command -v qemu-system-x86_64 >/dev/null || pkgs+=(qemu-system-x86)
[ -x /usr/bin/containerd ] || pkgs+=(containerd)
# Headless Chromium renders the berth fleet --html page in its test.
[ -x /usr/bin/chromium ] || pkgs+=(chromium)
# mount(8) sets up the private mount namespace containerd runs in for the
# runtime configuration tests (internal/testkit/critest.StartOnRoot).
command -v mount >/dev/null || pkgs+=(mount)
# The real node of internal/testkit/testnode: runc, the CNI bridge/host-local
# plugins, ip(8) to delete its bridge.
command -v runc >/dev/null || pkgs+=(runc)
[ -x /usr/lib/cni/bridge ] || pkgs+=(containernetworking-plugins)
command -v ip >/dev/null || pkgs+=(iproute2)
# mkfs.erofs: containerd 2.1's erofs differ loads with it (TestErofsLive
# logs what 2.2+ make of Debian 12's 1.5, which lacks --tar).
command -v mkfs.erofs >/dev/null || pkgs+=(erofs-utils)
# swtpm: the software TPM the edk2 event-log oracle boots the firmware with
# (internal/node/refvalues TestTPMOracle).
command -v swtpm >/dev/null || pkgs+=(swtpm)
if ((${#pkgs[@]})); then
  if [ "$(id -u)" != 0 ]; then
    echo "tools.sh: need root to install: ${pkgs[*]}" >&2; exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Another tools.sh (a parallel `make test`) may hold the dpkg lock.
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
echo "export BERTH_CACHE=$cache" >> "$envtmp"

# The parts below (each containerd version, nydus-snapshotter, the Debian
# kernel, Kubernetes, Helm) are independent: each is started in the
# background, at most ${BERTH_TOOLS_JOBS:-3} at a time, longest first. Two
# cores are not kept busy by one build: module downloads wait on the
# network and every link is a single thread; built one after another the
# cold run took some 39 minutes. Each part writes its env lines to a file of
# its own and its output to a log of its own; they are joined in a fixed
# order at the end, and a part that fails makes tools.sh fail with that
# part's log. Each part still builds into a temporary name and moves the
# result into place whole, under a lock of its own, so a second tools.sh
# (a parallel `make test`) waits for it instead of building it twice.
parts=$(mktemp -d "${TMPDIR:-/tmp}/berth-tools.XXXXXX")
trap 'rm -f "$envtmp" "$envfile.tmp.$$"; rm -rf "$parts"' EXIT

# go_module_dir MOD@VER WORK -> the module's directory in the module cache
# (downloaded, checked against the checksum database), on stdout.
go_module_dir() {
  local json dir
  # Outside any module, so that berth's go.mod/go.sum are not consulted.
  json=$(cd "$2" && go mod download -json "$1")
  dir=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then
    echo "tools.sh: go mod download $1 gave no directory:" >&2
    echo "$json" >&2; return 1
  fi
  echo "$dir"
}

# containerd, every version in tools/containerd-versions, for the runtime
# configuration tests, built the way testdata/upstream/runtime-configs/README.md
# says the configs there were made: the module as the proxy serves it
# (checked against the checksum database), copied to a writable folder
# (-mod=mod may add go.sum lines; 2.0.x ships vendor/modules.txt without
# the code) and built with containerd's Makefile tag and version ldflags
# (and its -s -w, which it adds unless GODEBUG is set: also a shorter link).
# no_btrfs: Debian's libbtrfs-dev is not installed here, and the tests need
# no btrfs snapshotter. The copy has no VCS data, so -buildvcs=false
# overrides the Makefile's GOFLAGS=-buildvcs=auto. Debian's package above is
# 1.6.x; BERTH_CONTAINERDS lists it first. Every version is started by a
# test: internal/node/configure's corpus and live tests run each one.
build_containerd() { # VERSION [shim]
  # With "shim", containerd-shim-runc-v2 of the same source is built too
  # (static, -trimpath, as upstream's Makefile builds shims), for the real
  # node of internal/testkit/testnode: Debian's 1.6 shim cannot start tasks for
  # containerd 2.x ("failed to start shim: ... not found").
  local ver=$1 out="$cache/bin/containerd-$1" shim="$cache/bin/containerd-shim-runc-v2-$1"
  local mod=github.com/containerd/containerd major=${1%%.*} want=()
  exec 8>"$cache/bin/.containerd-$ver.lock"
  flock 8   # concurrent tools.sh runs wait here instead of building twice
  [ -x "$out" ] || want+=(containerd)
  [ "${2:-}" != shim ] || [ -x "$shim" ] || want+=(shim)
  ((${#want[@]})) || return 0
  ((major < 2)) || mod+="/v$major"
  echo "tools.sh: building ${want[*]} $ver from $mod@v$ver (slow on a cold cache)"
  local start=$SECONDS dir
  # work is global: the part is a subshell of its own, whose EXIT trap
  # removes it after the function has returned.
  work=$(mktemp -d "${TMPDIR:-/tmp}/berth-containerd-$ver.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  dir=$(go_module_dir "$mod@v$ver" "$work")
  cp -R "$dir" "$work/src"
  chmod -R u+w "$work/src"
  local ldflags="-s -w -X $mod/version.Version=v$ver -X $mod/version.Package=github.com/containerd/containerd"
  # This part's own temporary names, taken once: a ( ) below has another $BASHPID.
  local tmp=".tmp.$BASHPID"
  if [[ " ${want[*]} " == *" containerd "* ]]; then
    (cd "$work/src" && go build -buildvcs=false -mod=mod -tags "urfave_cli_no_docs no_btrfs" \
      -ldflags "$ldflags" -o "$out$tmp" ./cmd/containerd)
    mv "$out$tmp" "$out"
  fi
  if [[ " ${want[*]} " == *" shim "* ]]; then
    (cd "$work/src" && CGO_ENABLED=0 go build -buildvcs=false -mod=mod -trimpath -tags "urfave_cli_no_docs no_btrfs" \
      -ldflags "$ldflags" -o "$shim$tmp" ./cmd/containerd-shim-runc-v2)
    mv "$shim$tmp" "$shim"
  fi
  echo "tools.sh: ${want[*]} $ver built in $((SECONDS - start))s"
}
part_containerd() { # VERSION [shim] ENVFILE; the env lines are written below, in version order
  if (($# == 3)); then build_containerd "$1" "$2"; else build_containerd "$1"; fi
}

# containerd-nydus-grpc (nydus-snapshotter), the proxy snapshotter berth
# configures for its guest-pull platforms, for the test that starts it next
# to a real containerd and lists its plugin over introspection
# (internal/node/configure). Built like containerd above: the module as the
# proxy serves it, copied to a writable folder, its own go.mod; the version
# is in tools/nydus-snapshotter. A cold build takes a few minutes (about a
# hundred modules to download); a warm run only checks the file.
part_nydus() { # ENVFILE
  local nydusver nydus nmod=github.com/containerd/nydus-snapshotter start=$SECONDS dir tmp=".tmp.$BASHPID"
  nydusver=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' tools/nydus-snapshotter)
  nydus="$cache/bin/containerd-nydus-grpc-$nydusver"
  exec 8>"$cache/bin/.nydus.lock"
  flock 8
  if [ ! -x "$nydus" ]; then
    echo "tools.sh: building containerd-nydus-grpc from $nmod@v$nydusver (slow on a cold cache)"
    work=$(mktemp -d "${TMPDIR:-/tmp}/berth-nydus.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    dir=$(go_module_dir "$nmod@v$nydusver" "$work")
    cp -R "$dir" "$work/src"
    chmod -R u+w "$work/src"
    (cd "$work/src" && CGO_ENABLED=0 go build -buildvcs=false -mod=mod -trimpath \
      -ldflags "-s -w -X $nmod/version.Version=v$nydusver" -o "$nydus$tmp" ./cmd/containerd-nydus-grpc)
    mv "$nydus$tmp" "$nydus"
    echo "tools.sh: containerd-nydus-grpc $nydusver built in $((SECONDS - start))s"
  fi
  echo "export BERTH_NYDUS_SNAPSHOTTER=$nydus" >> "$1"
}

# The Debian kernel the TDX RTMR tests measure (14 MB, not committed),
# re-obtained from Debian by pinned SHA-256; writes BERTH_TDX_KERNEL.
part_kernel() { # ENVFILE
  bash internal/node/refvalues/testdata/fetch-kernel.sh "$cache/refvalues"
  echo "export BERTH_TDX_KERNEL=$cache/refvalues/vmlinuz-6.1.0-57-cloud-amd64" >> "$1"
}

# QEMU 10.0 (bookworm-backports), unpacked beside the system's 7.2 for the
# refvalues tests that ask QEMU >= 10 what it hands the firmware; writes
# BERTH_QEMU10. See .ci/qemu10.sh.
part_qemu10() { BERTH_CACHE="$cache" bash .ci/qemu10.sh "$1"; }

# Kubernetes control plane and node (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kubectl) for the
# cluster-mode tests and the real node, built from tools/k8s; writes
# KUBEBUILDER_ASSETS. See .ci/k8s.sh. The longest part (some 20 minutes
# cold), so it starts first.
part_k8s() { BERTH_CACHE="$cache" bash .ci/k8s.sh "$1"; }
# Helm v4 for the chart tests (deploy/helm_test.go), built from tools/helm;
# writes BERTH_HELM. See .ci/helm.sh.
part_helm() { BERTH_CACHE="$cache" bash .ci/helm.sh "$1"; }

jobs=${BERTH_TOOLS_JOBS:-3}
running=() order=() failed=()
declare -A began=()
# reap waits until one running part has ended and notes how it ended. Each
# part writes its exit code to NAME.rc as its last act (bash 5.2's wait -n
# misses a job that ended before it was called, so the files are polled).
reap() {
  local i name rc
  while :; do
    for i in "${!running[@]}"; do
      name=${running[$i]}
      [ -s "$parts/$name.rc" ] || continue
      rc=$(<"$parts/$name.rc")
      unset "running[$i]"
      running=("${running[@]}")
      echo "tools.sh: part $name ended after $((SECONDS - ${began[$name]}))s (exit $rc)" >> "$parts/$name.log"
      ((rc == 0)) || failed+=("$name")
      return 0
    done
    sleep 0.2
  done
}
# start_part NAME FUNCTION ARGS...: runs FUNCTION ARGS... ENVFILE in the
# background once a slot is free; after a failure nothing new starts.
start_part() {
  local name=$1; shift
  while ((${#running[@]} >= jobs)); do reap; done
  ((${#failed[@]} == 0)) || return 0
  order+=("$name")
  began[$name]=$SECONDS
  : > "$parts/$name.env"
  (
    # Not `|| rc=$?`: that would switch -e off inside the part.
    set +e
    (set -e; "$@" "$parts/$name.env") > "$parts/$name.log" 2>&1
    echo "$?" > "$parts/$name.rc"
  ) &
  running+=("$name")
}

# Debian's version as dpkg knows it: 1.6.20~ds1-1+deb12u3 -> 1.6.20.
debver=$(dpkg-query -W -f '${Version}' containerd)
debver=${debver%%[~+-]*}
mapfile -t vers < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' tools/containerd-versions)
newest2=$(printf '%s\n' "${vers[@]}" | grep '^2\.' | sort -V | tail -n1)

start_part kernel part_kernel
start_part qemu10 part_qemu10
start_part k8s part_k8s
# Newest first: the 2.x builds are the larger ones.
for ver in $(printf '%s\n' "${vers[@]}" | sort -rV); do
  if [ "$ver" = "$newest2" ]; then
    start_part "containerd-$ver" part_containerd "$ver" shim
  else
    start_part "containerd-$ver" part_containerd "$ver"
  fi
done
start_part nydus part_nydus
start_part helm part_helm
while ((${#running[@]})); do reap; done

for name in "${order[@]}"; do
  sed "s/^/[$name] /" "$parts/$name.log"
done
if ((${#failed[@]})); then
  for name in "${failed[@]}"; do
    echo "tools.sh: part $name FAILED; its log:" >&2
    cat "$parts/$name.log" >&2
  done
  echo "tools.sh: failed: ${failed[*]}" >&2
  exit 1
fi

ctrs="$debver=/usr/bin/containerd"
for ver in "${vers[@]}"; do ctrs+=" $ver=$cache/bin/containerd-$ver"; done
# BERTH_CONTAINERDS: space-separated VERSION=PATH, Debian's first, then
# tools/containerd-versions in order (paths must not contain spaces).
echo "export BERTH_CONTAINERDS=\"$ctrs\"" >> "$envtmp"
# One 1.x and one 2.x, for the tests that need just one of each.
echo "export BERTH_CONTAINERD1=/usr/bin/containerd" >> "$envtmp"
echo "export BERTH_CONTAINERD2=$cache/bin/containerd-$newest2" >> "$envtmp"
# Its runc shim, for the real node of internal/testkit/testnode.
echo "export BERTH_CONTAINERD2_SHIM=$cache/bin/containerd-shim-runc-v2-$newest2" >> "$envtmp"
for name in nydus kernel qemu10 k8s helm; do cat "$parts/$name.env" >> "$envtmp"; done
cp "$envtmp" "$envfile.tmp.$$"
mv "$envfile.tmp.$$" "$envfile"
