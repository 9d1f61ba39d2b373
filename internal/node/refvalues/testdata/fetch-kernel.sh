#!/bin/bash
# Re-obtains the Debian kernel the RTMR tests measure (14 MB, not committed):
# linux-image-6.1.0-57-cloud-amd64 6.1.192-3 from Debian 12 (bookworm-security),
# a signed EFI-stub bzImage, GPL-2.0. Both the package and the vmlinuz are pinned
# by SHA-256. Usage: fetch-kernel.sh DIR  -> DIR/vmlinuz-6.1.0-57-cloud-amd64
set -euo pipefail
dir=${1:?usage: fetch-kernel.sh DIR}
pkg=linux-image-6.1.0-57-cloud-amd64 ver=6.1.192-3
deb_sha=4fdd0172a8c3f41a97e92465b2ac1867e1c10d82d7aeed3d26ee7a5d14df1754
vmlinuz_sha=1a7ac0c40b10b98353b6f85fa9a0d4f2703287979567e19629d35ad2d777d124
out="$dir/vmlinuz-6.1.0-57-cloud-amd64"
if [ -f "$out" ] && echo "$vmlinuz_sha  $out" | sha256sum -c --status; then
  exit 0
fi
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# A machine whose package lists were never fetched knows no version: update
# them once and retry.
(cd "$tmp" && apt-get download "$pkg=$ver" >&2) || { apt-get update >&2 && (cd "$tmp" && apt-get download "$pkg=$ver" >&2); }
deb=$(ls "$tmp"/*.deb)
echo "$deb_sha  $deb" | sha256sum -c --status || { echo "fetch-kernel.sh: $deb does not have the pinned SHA-256 $deb_sha" >&2; exit 1; }
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" ./boot/vmlinuz-6.1.0-57-cloud-amd64
echo "$vmlinuz_sha  $tmp/boot/vmlinuz-6.1.0-57-cloud-amd64" | sha256sum -c --status || { echo "fetch-kernel.sh: vmlinuz does not have the pinned SHA-256" >&2; exit 1; }
mv "$tmp/boot/vmlinuz-6.1.0-57-cloud-amd64" "$out.tmp" && mv "$out.tmp" "$out"
