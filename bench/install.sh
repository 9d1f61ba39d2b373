#!/usr/bin/env bash
# Measures berth install:
#  1. verify-and-install throughput of a 1 GiB component from a --from
#     directory, against `sha256sum` of the same file (budget: >= 90%);
#     the install target is on tmpfs (/dev/shm) to measure the installer,
#     then under /tmp to show what this machine's disk allows;
#  2. a re-run with nothing to do (budget: < 100 ms, 0 bytes fetched);
#  3. bytes fetched for one platform versus the whole example manifest.
# The 1 GiB file lives in /tmp and is deleted at the end.
# Usage: bench/install.sh [size-in-MiB]
set -euo pipefail
cd "$(dirname "$0")/.."
mib="${1:-1024}"
work="$(mktemp -d /tmp/berth-bench-install.XXXXXX)"
shm=""
if [ -d /dev/shm ]; then shm="$(mktemp -d /dev/shm/berth-bench-install.XXXXXX)"; fi
trap 'rm -rf "$work" ${shm:+"$shm"}' EXIT
bin="${BERTH_BIN:-$work/berth}"
# berth runs berth-cluster (beside it) for install, as a user's does.
[ -n "${BERTH_BIN:-}" ] || go build -o "$work/" ./cmd/berth ./cmd/berth-cluster
mkdir -p "$work/empty"

mkdir -p "$work/from"
big="$work/from/big.img"
dd if=/dev/urandom of="$big" bs=1M count="$mib" status=none
sum=$(sha256sum "$big" | cut -d' ' -f1)
size=$(stat -c %s "$big")
cat >"$work/manifest.yaml" <<YAML
apiVersion: berth.dev/manifest/v1
name: bench
version: "1"
components:
  - name: big
    version: "1"
    role: image
    sources: [http://127.0.0.1:9/unplugged/big.img]
    sha256: $sum
    size: $size
    path: share/big.img
    mode: "0644"
YAML

ms() { echo $(( ($2 - $1) / 1000000 )); }
best() { printf '%s\n' "$@" | sort -n | head -1; }

cat "$big" >/dev/null # page cache: both sides read from memory
sha_t=()
for _ in 1 2 3; do
  s=$(date +%s%N); sha256sum "$big" >/dev/null; e=$(date +%s%N); sha_t+=("$(ms "$s" "$e")")
done
sha_ms=$(best "${sha_t[@]}")

install_run() { # $1: root dir; prints ms
  local root="$1" s e
  rm -rf "$root"; mkdir -p "$root"
  s=$(date +%s%N)
  "$bin" --root "$root" install -p kubeadm-qemu-none -m "$work/manifest.yaml" --from "$work/from" \
    --cache "$root/cache" --force --no-config >/dev/null 2>&1
  e=$(date +%s%N)
  cmp -s "$big" "$root/opt/berth/share/big.img" || { echo "installed file differs" >&2; exit 1; }
  ms "$s" "$e"
}
report() { # name ms
  awk -v n="$1" -v t="$2" -v mib="$mib" -v sha="$sha_ms" \
    'BEGIN { printf "%-34s %6d ms  %7.0f MiB/s  %5.1f%% of sha256sum\n", n, t, mib*1000/t, 100*sha/t }'
}
echo "component: $mib MiB in $work/from"
awk -v t="$sha_ms" -v mib="$mib" 'BEGIN { printf "%-34s %6d ms  %7.0f MiB/s\n", "sha256sum", t, mib*1000/t }'
if [ -n "$shm" ]; then
  t=(); for _ in 1 2 3; do t+=("$(install_run "$shm/root")"); done
  report "berth install (target on tmpfs)" "$(best "${t[@]}")"
fi
t=(); for _ in 1 2; do t+=("$(install_run "$work/root")"); done
report "berth install (target under /tmp)" "$(best "${t[@]}")"

# Re-run with nothing to do.
root="$work/root"
fetched=$("$bin" --root "$root" install -p kubeadm-qemu-none -m "$work/manifest.yaml" --cache "$root/cache" \
  --force --no-config -o json 2>/dev/null | python3 -c 'import json,sys
for l in sys.stdin:
    d=json.loads(l)
    if "changed" in d: print(d["fetched"], d["changed"])')
t=()
for _ in $(seq 10); do
  s=$(date +%s%N)
  "$bin" --root "$root" install -p kubeadm-qemu-none -m "$work/manifest.yaml" --cache "$root/cache" --force --no-config >/dev/null 2>&1
  e=$(date +%s%N); t+=("$(( (e - s) / 100000 ))")
done
med=$(printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
awk -v m="$med" -v f="$fetched" 'BEGIN { printf "re-run, nothing to do: median %.1f ms (CLI, discovery of the root included); fetched bytes, changed: %s\n", m/10, f }'
rm -f "$big"

# Bytes one platform needs out of the example manifest.
echo "bytes fetched per platform (examples/manifest-kata.yaml, dry run):"
for p in kubeadm-qemu-snp kubeadm-qemu-tdx kubeadm-qemu-none kubeadm-cloud-hypervisor-none kubeadm-firecracker-none k3s-qemu-snp+gpu kubeadm-qemu-none+nydus; do
  "$bin" --root "$work/empty" install -p "$p" -m examples/manifest-kata.yaml --cache "$work/empty-cache" --dry-run --force -o json 2>/dev/null |
    python3 -c 'import json,sys; d=json.load(sys.stdin)["plan"]; print("  %-32s %7.1f MiB of %7.1f MiB  (%4.1f%%)  %2d components" % (sys.argv[1], d["bytes"]/2**20, d["allBytes"]/2**20, 100*d["bytes"]/d["allBytes"], len(d["components"])))' "$p"
done
