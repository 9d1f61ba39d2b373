#!/bin/bash
# Produces the expected values in vectors-rtmr.psv with Fraunhofer-AISEC
# measured-boot-tools calculate-tdx-mrs (commit 084313fb9d2243da7065b51e7e0a487bf1678b22,
# built with `make` in calculate-tdx-mrs/). Run from internal/node/refvalues/testdata with ORACLE=path/to/calculate-tdx-mrs,
# ORACLE_CFG=its configs/default.cfg and KERNEL=path/to/vmlinuz-6.1.0-57-cloud-amd64
# (fetch-kernel.sh): bash rtmr-oracle.sh > vectors-rtmr.psv
set -euo pipefail
echo "# id|kind|firmware|ACPI blobs|QEMU major|memory MiB|initrd|cmdline|expected SHA-384 (hex)"
: "${ORACLE:?}" "${KERNEL:?}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
n=0
row() { n=$((n+1)); echo "R$n|$*"; }
mr() { "$ORACLE" "$@" --summary | sed -n 's/^Name: RTMR[0-9]//p' | tr A-Z a-z; }
event() { "$ORACLE" "$@" --eventlog | grep sha384 | tail -1 | awk '{print $2}'; }
# RTMR0: every event after the TD HOB comes from the firmware and QEMU's blobs; the oracle's
# TD HOB is fixed (see SOURCES.md).
for fw in OVMF.debian12u1.fd OVMF.debian12u2.fd; do
  for m in 2048 4096; do
    a=acpi-qemu7.2-$m
    row "rtmr0-oraclehob|$fw|$a|-|4096|-|-|$(mr --mrs 1 --ovmf $fw --acpirsdp $a/rsdp --acpitables $a/tables --tableloader $a/table-loader)"
  done
done
# RTMR1, QEMU >= 10: the unpatched kernel.
row "rtmr1|-|-|10|2048|-|-|$(mr --mrs 2 --kernel "$KERNEL")"
# RTMR1, QEMU < 10: setup header patched as QEMU does (no initrd / initrd placed for the memory).
initrdmax=$(od -An -tu4 -j $((0x22c)) -N4 "$KERNEL" | tr -d ' ')
isize=$(stat -c %s initrd-synthetic.bin)
cfg() { # ramdisk_image ramdisk_size
  sed -e "s/^PeCoffRamdiskImage.*/PeCoffRamdiskImage = $(printf %x "$1")/" -e "s/^PeCoffRamdiskSize.*/PeCoffRamdiskSize = $(printf %x "$2")/" "$ORACLE_CFG" > "$tmp/cfg"; echo "$tmp/cfg"; }
row "rtmr1|-|-|7|2048|-|-|$(mr --mrs 2 --kernel "$KERNEL" --config "$(cfg 0 0)")"
for m in 1024 2048 4096; do
  low=$(( m >= 2816 ? 2048 : m )); lim=$(( low*1024*1024 - 0x20000 - 1 )); max=$(( initrdmax < lim ? initrdmax : lim ))
  addr=$(( (max - isize) & ~0xfff ))
  row "rtmr1|-|-|7|$m|initrd-synthetic.bin|-|$(mr --mrs 2 --kernel "$KERNEL" --config "$(cfg $addr $isize)")"
done
# RTMR2: the command line edk2 measures (UTF-16LE with NUL).
for c in "console=hvc0" "tsc=reliable no_timer_check rcupdate.rcu_expedited=1 i8042.direct=1 i8042.dumbkbd=1 i8042.nopnp=1 i8042.noaux=1 noreplace-smp reboot=k cryptomgr.notests net.ifnames=0 pci=lastbus=0 console=hvc0 console=hvc1 quiet panic=1 nr_cpus=1 selinux=0 scsi_mod.scan=none agent.log=debug"; do
  printf '%s' "$c" > "$tmp/c"
  row "rtmr2|-|-|10|2048|-|$c|$(mr --mrs 3 --cmdline "$tmp/c")"
  printf '%s' "$c initrd=initrd" > "$tmp/c"
  row "cmdline-event|-|-|10|2048|initrd-synthetic.bin|$c|$(event --mrs 3 --cmdline "$tmp/c")"
done
