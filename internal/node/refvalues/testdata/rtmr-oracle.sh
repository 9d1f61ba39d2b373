#!/bin/bash
# Produces the expected values in vectors-rtmr.psv with Fraunhofer-AISEC
# measured-boot-tools calculate-tdx-mrs (commit 084313fb9d2243da7065b51e7e0a487bf1678b22,
# built with `make` in calculate-tdx-mrs/). Run from internal/node/refvalues/testdata with ORACLE=path/to/calculate-tdx-mrs,
# ORACLE_CFG=its configs/default.cfg and KERNEL=path/to/vmlinuz-6.1.0-57-cloud-amd64
# (fetch-kernel.sh), QEMU7=Debian 12's qemu-system-x86_64 (7.2) and QEMU10=bookworm-backports
# 10.0.2 (.ci/qemu10.sh, BERTH_QEMU10): bash rtmr-oracle.sh > vectors-rtmr.psv
set -euo pipefail
echo "# id|kind|firmware|ACPI blobs|QEMU major|memory MiB|initrd|cmdline|expected SHA-384 (hex)"
: "${ORACLE:?}" "${KERNEL:?}" "${QEMU7:?}" "${QEMU10:?}"
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
# RTMR1, QEMU < 10: setup header patched as QEMU does (no initrd / initrd placed for the memory:
# below low RAM less QEMU's 0x20000 + 0x8000 bytes of firmware data, hw/i386/pc.c).
initrdmax=$(od -An -tu4 -j $((0x22c)) -N4 "$KERNEL" | tr -d ' ')
isize=$(stat -c %s initrd-synthetic.bin)
cfg() { # ramdisk_image ramdisk_size
  sed -e "s/^PeCoffRamdiskImage.*/PeCoffRamdiskImage = $(printf %x "$1")/" -e "s/^PeCoffRamdiskSize.*/PeCoffRamdiskSize = $(printf %x "$2")/" "$ORACLE_CFG" > "$tmp/cfg"; echo "$tmp/cfg"; }
row "rtmr1|-|-|7|2048|-|-|$(mr --mrs 2 --kernel "$KERNEL" --config "$(cfg 0 0)")"
for m in 1024 2048 4096; do
  low=$(( m >= 2816 ? 2048 : m )); lim=$(( low*1024*1024 - 0x28000 - 1 )); max=$(( initrdmax < lim ? initrdmax : lim ))
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
# fw_cfg rows: what berth reads back from the QEMU itself (DumpBootBlobs) must give the oracle's
# values. Where QEMU put the initrd is asked from that QEMU here too, independently of berth: the
# guest is created stopped and FW_CFG_INITRD_ADDR (item 0x0a) is read through the legacy fw_cfg
# ports (select at 0x510, data at 0x511, 32 bits little-endian) over qtest.
initrd_addr() { # QEMU MEM -> FW_CFG_INITRD_ADDR, decimal
  local q=$1 m=$2 line v=0 i
  coproc QT { exec "$q" -machine q35,kernel-irqchip=split,smm=off,pic=off -m "${m}M" -smp 1,maxcpus=1 -display none \
    -nodefaults -no-user-config -S -accel tcg -qtest stdio -qtest-log /dev/null \
    -kernel "$KERNEL" -initrd initrd-synthetic.bin -append console=hvc0 2>/dev/null; }
  qt() { echo "$1" >&"${QT[1]}"; while read -r line <&"${QT[0]}"; do [[ $line == OK* ]] && break; done; echo "${line#OK}"; }
  qt "outw 0x510 0xa" >/dev/null
  for i in 0 1 2 3; do v=$(( v | ($(qt "inb 0x511") << (8*i)) )); done
  kill "$QT_PID"; wait "$QT_PID" 2>/dev/null || true
  echo "$v"
}
row "rtmr1-fwcfg|-|-|7|2048|-|-|$(mr --mrs 2 --kernel "$KERNEL" --config "$(cfg 0 0)")"
# 2815 MiB: all RAM below 4 GiB, and the kernel takes its initrd above initrd_addr_max
# (XLF_CAN_BE_LOADED_ABOVE_4G), so QEMU puts it at the top of low RAM.
for m in 1024 2048 2815 4096; do
  row "rtmr1-fwcfg|-|-|7|$m|initrd-synthetic.bin|-|$(mr --mrs 2 --kernel "$KERNEL" --config "$(cfg "$(initrd_addr "$QEMU7" $m)" $isize)")"
done
# QEMU >= 10 offers the kernel file unpatched (etc/boot/kernel), with or without an initrd.
row "rtmr1-fwcfg|-|-|10|2048|-|-|$(mr --mrs 2 --kernel "$KERNEL")"
for m in 2048 4096; do
  row "rtmr1-fwcfg|-|-|10|$m|initrd-synthetic.bin|-|$(mr --mrs 2 --kernel "$KERNEL")"
done
# RTMR2 and the command-line event from the command line QEMU hands over.
c="console=hvc0"
for q in 7 10; do
  printf '%s' "$c" > "$tmp/c"
  row "rtmr2-fwcfg|-|-|$q|2048|-|$c|$(mr --mrs 3 --cmdline "$tmp/c")"
  printf '%s' "$c initrd=initrd" > "$tmp/c"
  row "cmdline-event-fwcfg|-|-|$q|2048|initrd-synthetic.bin|$c|$(event --mrs 3 --cmdline "$tmp/c")"
done
