package refvalues

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ACPIBlobs are the fw_cfg files QEMU generates for the firmware's ACPI
// table loader, as the firmware reads them: the loader script and every
// file it allocates, in the order it allocates them.
type ACPIBlobs struct {
	// Loader is etc/table-loader.
	Loader []byte `json:"-"`
	// Files are the allocated files in allocation order.
	Files []FwCfgFile `json:"-"`
	// Platform are the other fw_cfg data edk2 2025.05 and later measure
	// (the cached fw_cfg items, the SMBIOS tables); nil in blobs read
	// before berth knew them.
	Platform *PlatformBlobs `json:"-"`
}

// FwCfgFile is one named fw_cfg file.
type FwCfgFile struct {
	Name string
	Data []byte
}

// tableLoaderFile is the fw_cfg file with the ACPI linker/loader script.
const tableLoaderFile = "etc/table-loader"

// loaderAllocations returns the file names the table loader allocates, in
// order. Each command is 128 bytes; ALLOCATE (1) carries the file name in
// its first 56 bytes after the 4-byte command (QEMU
// hw/acpi/bios-linker-loader.c, "BiosLinkerLoaderEntry").
func loaderAllocations(loader []byte) ([]string, error) {
	const entry, allocate, nameLen = 128, 1, 56
	if len(loader) == 0 || len(loader)%entry != 0 {
		return nil, fmt.Errorf("%s: %d bytes, expected a non-empty multiple of %d-byte commands", tableLoaderFile, len(loader), entry)
	}
	var names []string
	for off := 0; off < len(loader); off += entry {
		if binary.LittleEndian.Uint32(loader[off:]) != allocate {
			continue
		}
		name := cString(loader[off+4 : off+4+nameLen])
		if name == "" {
			return nil, fmt.Errorf("%s: ALLOCATE command at offset %d has an empty file name", tableLoaderFile, off)
		}
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no ALLOCATE command: the firmware would install no ACPI table", tableLoaderFile)
	}
	return names, nil
}

// QEMUMachine is the guest QEMU builds ACPI tables for. The tables depend
// on the machine type, memory and CPU topology (and the devices, which
// Kata's TDX guests keep off the root bus the tables describe).
type QEMUMachine struct {
	// Binary is the qemu-system-x86_64 to ask.
	Binary string
	// Machine is the -machine value without accelerator options, e.g.
	// "q35,kernel-irqchip=split,hpet=off" (confidential-guest-support is
	// left out: QEMU cannot create a TDX object without TDX hardware).
	Machine   string
	MemoryMiB uint64
	VCPUs     int
	MaxVCPUs  int
	// Extra are further arguments, passed unchanged.
	Extra []string
	// PCIExBar is the PCIe MMCONFIG base the firmware programs into the
	// q35 PCIEXBAR before it reads the ACPI tables (FirmwarePCIExBar);
	// 0 is 0xb0000000, edk2's before edk2-stable202305.
	PCIExBar uint32
}

// pciExBar is the PCIEXBAR value berth programs for m: the base, 256
// buses, enabled.
func (m QEMUMachine) pciExBar() uint32 {
	if m.PCIExBar == 0 {
		return mchPCIExBarValue
	}
	return m.PCIExBar | 1
}

// Args returns the QEMU command line the blobs are dumped with. The
// guest is created stopped (-S) and qtest reads the fw_cfg files from
// outside, so no guest code runs and no KVM or TDX is needed.
//
// "-S" is what makes the dump deterministic. "-qtest" alone only adds the
// qtest server (Debian's QEMU has no qtest accelerator): QEMU then starts
// the vCPU and runs its default SeaBIOS next to berth's reads. SeaBIOS
// programs the Q35 PCIEXBAR (MMCONFIG at 0xb0000000) and the ICH9 PMBASE
// (0x600) and reads etc/table-loader, and QEMU rebuilds the tables from
// those registers on the first fw_cfg access after reset
// (hw/i386/acpi-build.c acpi_build_update; acpi_get_mcfg, the DSDT's DRAC
// device and PCI0 _CRS, the FADT PM and GPE0 blocks). Whichever of berth
// and SeaBIOS came first decided the blobs, so the dump, and the RTMR0
// predicted from it, depended on CPU load. Stopped, the tables are built
// from the chipset state berth sets up through qtest before the first read:
// the registers TDVF programs before its DXE phase reads the tables
// (programChipset), not the reset state and not SeaBIOS's.
//
// "-accel tcg" keeps a host's /dev/kvm out of it: under KVM without SMM
// support QEMU leaves the FADT's SMI command port out, so the same
// machine would dump differently on another host.
func (m QEMUMachine) Args() []string {
	maxv := m.MaxVCPUs
	if maxv < m.VCPUs {
		maxv = m.VCPUs
	}
	args := []string{
		"-machine", m.Machine,
		"-m", strconv.FormatUint(m.MemoryMiB, 10) + "M",
		"-smp", fmt.Sprintf("%d,maxcpus=%d", m.VCPUs, maxv),
		"-display", "none", "-nodefaults", "-no-user-config",
		"-S", "-accel", "tcg", "-qtest", "stdio", "-qtest-log", "/dev/null",
	}
	return append(args, m.Extra...)
}

// DumpACPIBlobs starts QEMU stopped, with the qtest server, for the
// machine (Args) and reads the ACPI fw_cfg files through the fw_cfg DMA interface, exactly as
// the firmware would see them at boot.
func DumpACPIBlobs(ctx context.Context, m QEMUMachine) (*ACPIBlobs, error) {
	return dumpACPIBlobs(ctx, m, 0)
}

// dumpACPIBlobs is DumpACPIBlobs waiting settle after QEMU starts before
// the first read: a test gives a guest that would run the time to do so.
func dumpACPIBlobs(ctx context.Context, m QEMUMachine, settle time.Duration) (*ACPIBlobs, error) {
	if m.Binary == "" {
		return nil, fmt.Errorf("no QEMU binary given: the ACPI tables measured into RTMR0 come from QEMU")
	}
	var blobs *ACPIBlobs
	err := runQtest(ctx, m, m.Args(), nil, settle, func(q *qtest) (err error) {
		blobs, err = q.dumpACPI(m.pciExBar())
		return err
	})
	return blobs, err
}

// runQtest starts QEMU stopped with the qtest server on its standard
// input and output, with args and extra (inherited from fd 3 on), waits
// settle, hands the connection to talk and ends QEMU once talk returns.
func runQtest(ctx context.Context, m QEMUMachine, args []string, extra []*os.File, settle time.Duration, talk func(*qtest) error) error {
	if m.MemoryMiB == 0 || m.VCPUs <= 0 {
		return fmt.Errorf("QEMU machine needs memory and vCPUs, got %d MiB and %d vCPUs", m.MemoryMiB, m.VCPUs)
	}
	// A QEMU that does not speak qtest as expected must not hang berth:
	// the dump takes about a second.
	ctx, cancel := context.WithTimeout(ctx, qtestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.Binary, args...)
	cmd.ExtraFiles = extra
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("qtest pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("qtest pipe: %w", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", m.Binary, err)
	}
	q := &qtest{w: stdin, r: bufio.NewReader(stdout)}
	if settle > 0 {
		select {
		case <-time.After(settle):
		case <-ctx.Done():
		}
	}
	derr := talk(q)
	// The qtest server keeps QEMU running after its client leaves:
	// end it once the blobs are read.
	stdin.Close()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if derr != nil {
		if s := strings.TrimSpace(stderr.String()); s != "" {
			return fmt.Errorf("%s %s: %w (qemu: %s)", m.Binary, strings.Join(args, " "), derr, s)
		}
		return fmt.Errorf("%s %s: %w", m.Binary, strings.Join(args, " "), derr)
	}
	return nil
}

// qtest speaks QEMU's qtest protocol: one command a line, one "OK ..."
// answer a line.
type qtest struct {
	w io.Writer
	r *bufio.Reader
}

func (q *qtest) cmd(format string, a ...any) (string, error) {
	if _, err := fmt.Fprintf(q.w, format+"\n", a...); err != nil {
		return "", fmt.Errorf("qtest write: %w", err)
	}
	for {
		line, err := q.r.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("qtest: QEMU closed the connection (%w)", err)
		}
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "IRQ") { // asynchronous interrupt notice
			continue
		}
		if line == "OK" {
			return "", nil
		}
		if rest, ok := strings.CutPrefix(line, "OK "); ok {
			return rest, nil
		}
		return "", fmt.Errorf("qtest: %q answered %q", fmt.Sprintf(format, a...), line)
	}
}

// fw_cfg I/O ports and DMA control bits (QEMU docs/specs/fw_cfg.rst).
const (
	fwCfgSelectPort  = 0x510
	fwCfgDMALowPort  = 0x518
	fwCfgFileDir     = 0x19
	fwCfgDMARead     = 0x02
	fwCfgDMASelect   = 0x08
	fwCfgDMAError    = 0x01
	qtestDescAddr    = 0x1000
	qtestBufAddr     = 0x100000
	maxFwCfgFileSize = 16 << 20
	qtestTimeout     = 2 * time.Minute
	// qtestChunk is the most one DMA read of a large item moves.
	qtestChunk = 4 << 20
)

// read reads n bytes of fw_cfg item sel from offset 0 by DMA.
func (q *qtest) read(sel uint16, n uint32) ([]byte, error) {
	return q.dma(uint32(sel)<<16|fwCfgDMASelect|fwCfgDMARead, sel, n)
}

// readLarge reads n bytes of item sel in pieces of qtestChunk: after the
// first, which selects the item, each DMA read goes on where the last
// ended, so neither guest memory nor a qtest line holds a whole initrd.
func (q *qtest) readLarge(sel uint16, n uint32) ([]byte, error) {
	if n <= qtestChunk {
		return q.read(sel, n)
	}
	out := make([]byte, 0, n)
	ctl := uint32(sel)<<16 | fwCfgDMASelect | fwCfgDMARead
	for uint32(len(out)) < n {
		part, err := q.dma(ctl, sel, min(n-uint32(len(out)), qtestChunk))
		if err != nil {
			return nil, err
		}
		out = append(out, part...)
		ctl = fwCfgDMARead
	}
	return out, nil
}

// dma runs one fw_cfg DMA transfer with control word ctl of n bytes into
// guest memory and reads them back.
func (q *qtest) dma(ctl uint32, sel uint16, n uint32) ([]byte, error) {
	desc := make([]byte, 16)
	binary.BigEndian.PutUint32(desc[0:], ctl)
	binary.BigEndian.PutUint32(desc[4:], n)
	binary.BigEndian.PutUint64(desc[8:], qtestBufAddr)
	if _, err := q.cmd("b64write %#x %d %s", qtestDescAddr, len(desc), base64.StdEncoding.EncodeToString(desc)); err != nil {
		return nil, err
	}
	// The DMA address register is big-endian; writing its low half starts
	// the transfer.
	var be [4]byte
	binary.BigEndian.PutUint32(be[:], qtestDescAddr)
	if _, err := q.cmd("outl %#x %#x", fwCfgDMALowPort, binary.LittleEndian.Uint32(be[:])); err != nil {
		return nil, err
	}
	ctlOut, err := q.cmd("b64read %#x 4", qtestDescAddr)
	if err != nil {
		return nil, err
	}
	c, err := base64.StdEncoding.DecodeString(ctlOut)
	if err != nil || len(c) != 4 {
		return nil, fmt.Errorf("qtest: bad b64read answer %q", ctlOut)
	}
	if binary.BigEndian.Uint32(c)&fwCfgDMAError != 0 {
		return nil, fmt.Errorf("fw_cfg DMA read of item %#x failed", sel)
	}
	if n == 0 {
		return []byte{}, nil
	}
	out, err := q.cmd("b64read %#x %d", qtestBufAddr, n)
	if err != nil {
		return nil, err
	}
	data, err := base64.StdEncoding.DecodeString(out)
	if err != nil || uint32(len(data)) != n {
		return nil, fmt.Errorf("qtest: bad b64read answer for %d bytes", n)
	}
	return data, nil
}

// fwCfgEntry is a named file in QEMU's fw_cfg directory.
type fwCfgEntry struct {
	sel  uint16
	size uint32
}

// fileDir reads the fw_cfg file directory (item 0x19: a big-endian count,
// then 64-byte entries of size, selector and a NUL-padded name).
func (q *qtest) fileDir() (map[string]fwCfgEntry, error) {
	hdr, err := q.read(fwCfgFileDir, 4)
	if err != nil {
		return nil, err
	}
	count := binary.BigEndian.Uint32(hdr)
	if count == 0 || count > 4096 {
		return nil, fmt.Errorf("fw_cfg file directory lists %d files", count)
	}
	dir, err := q.read(fwCfgFileDir, 4+64*count)
	if err != nil {
		return nil, err
	}
	files := map[string]fwCfgEntry{}
	for i := range count {
		e := dir[4+64*i:]
		files[cString(e[8:64])] = fwCfgEntry{sel: binary.BigEndian.Uint16(e[4:]), size: binary.BigEndian.Uint32(e)}
	}
	return files, nil
}

// Chipset registers TDVF programs before DXE reads the ACPI tables
// (edk2 OvmfPkg/Library/PlatformInitLib/Platform.c
// PlatformMiscInitialization and PciExBarInitialization, run on the PEI
// and on TDX's PEI-less path alike; values from
// OvmfPkg/Include/IndustryStandard/Q35MchIch9.h and OVMF's
// PcdPciExpressBaseAddress).
const (
	q35MCHDeviceID    = 0x29c0
	ich9LPC           = 0x1f << 11 // bus 0, device 0x1f, function 0
	ich9PMBase        = 0x40
	ich9PMBaseMask    = 0xff80
	ich9PMBaseValue   = 0x600
	ich9ACPICntl      = 0x44
	ich9ACPIEn        = 0x80
	ich9RCBA          = 0xf0
	ich9RCBAValue     = 0xfed1c000 | 1 // base | enable
	mchPCIExBarLow    = 0x60
	mchPCIExBarHigh   = 0x64
	mchPCIExBarValue  = 0xb0000000 | 1 // base, 256 buses, enable
	pciCommand        = 0x04
	pciCommandIOSpace = 0x01
)

// pciRead32 and pciWrite32 access bus 0's configuration space through
// the 0xcf8/0xcfc ports, as the firmware does; dev is device<<11|fn<<8.
func (q *qtest) pciRead32(dev, reg uint32) (uint32, error) {
	if _, err := q.cmd("outl 0xcf8 %#x", 0x80000000|dev|reg); err != nil {
		return 0, err
	}
	out, err := q.cmd("inl 0xcfc")
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(out, "0x"), 16, 32)
	if err != nil {
		return 0, fmt.Errorf("qtest: bad inl answer %q", out)
	}
	return uint32(v), nil
}

func (q *qtest) pciWrite32(dev, reg, v uint32) error {
	if _, err := q.cmd("outl 0xcf8 %#x", 0x80000000|dev|reg); err != nil {
		return err
	}
	_, err := q.cmd("outl 0xcfc %#x", v)
	return err
}

// programChipset sets the q35 registers TDVF sets before its DXE phase
// reads the ACPI tables: the ICH9 ACPI PM I/O base (0x600) with ACPI
// decoding on, the root complex base and the PCI Express MMCONFIG window
// at 0xb0000000. QEMU builds the tables from these registers on the
// first fw_cfg read (hw/i386/acpi-build.c: the MCFG table, the FADT's
// PM1a/PM timer/GPE0 blocks, the DSDT's PCI0 resources), so tables read
// from a chipset at reset are not the ones the firmware measures: an
// OVMF that ran reads exactly the tables dumped after this
// (TestACPIBlobsAsFirmwareReads).
func (q *qtest) programChipset(pciExBar uint32) error {
	id, err := q.pciRead32(0, 0)
	if err != nil {
		return err
	}
	if id>>16 != q35MCHDeviceID {
		return fmt.Errorf("host bridge %04x:%04x is not the q35 MCH (8086:%04x): berth sets up the chipset as TDVF does on q35 only", id&0xffff, id>>16, q35MCHDeviceID)
	}
	pm, err := q.pciRead32(ich9LPC, ich9PMBase)
	if err != nil {
		return err
	}
	if err := q.pciWrite32(ich9LPC, ich9PMBase, pm&^ich9PMBaseMask|ich9PMBaseValue); err != nil {
		return err
	}
	for _, r := range []struct{ reg, bits uint32 }{{pciCommand, pciCommandIOSpace}, {ich9ACPICntl, ich9ACPIEn}} {
		v, err := q.pciRead32(ich9LPC, r.reg)
		if err != nil {
			return err
		}
		if err := q.pciWrite32(ich9LPC, r.reg, v|r.bits); err != nil {
			return err
		}
	}
	for _, w := range []struct{ dev, reg, v uint32 }{
		{ich9LPC, ich9RCBA, ich9RCBAValue},
		// The enable bit is cleared before the high half is written.
		{0, mchPCIExBarLow, 0}, {0, mchPCIExBarHigh, 0}, {0, mchPCIExBarLow, pciExBar},
	} {
		if err := q.pciWrite32(w.dev, w.reg, w.v); err != nil {
			return err
		}
	}
	return nil
}

func (q *qtest) dumpACPI(pciExBar uint32) (*ACPIBlobs, error) {
	if err := q.programChipset(pciExBar); err != nil {
		return nil, err
	}
	return q.readACPI()
}

// readACPI reads the table loader and the files it allocates, from the
// chipset as it is.
func (q *qtest) readACPI() (*ACPIBlobs, error) {
	files, err := q.fileDir()
	if err != nil {
		return nil, err
	}
	get := func(name string) ([]byte, error) {
		e, ok := files[name]
		if !ok {
			return nil, fmt.Errorf("QEMU offers no fw_cfg file %q", name)
		}
		if e.size > maxFwCfgFileSize {
			return nil, fmt.Errorf("fw_cfg file %q has %d bytes", name, e.size)
		}
		return q.read(e.sel, e.size)
	}
	loader, err := get(tableLoaderFile)
	if err != nil {
		return nil, err
	}
	names, err := loaderAllocations(loader)
	if err != nil {
		return nil, err
	}
	b := &ACPIBlobs{Loader: loader}
	for _, n := range names {
		d, err := get(n)
		if err != nil {
			return nil, err
		}
		b.Files = append(b.Files, FwCfgFile{Name: n, Data: d})
	}
	if b.Platform, err = q.readPlatform(files); err != nil {
		return nil, err
	}
	return b, nil
}

// KataTDXMachine is the guest Kata's qemu-tdx runtime starts, as far as
// the ACPI tables see it: a q35 machine with a split IRQ chip, without
// SMM and without the legacy PIC. A TDX QEMU turns both off for a TD
// itself (target/i386/kvm/tdx.c tdx_kvm_init: smm and pic "auto" become
// off; TDX has no SMM), and both change the tables (the FADT's SMI
// command port; from QEMU 10 the MADT's PC-AT flag); berth, which cannot
// create the TDX object, has to say so.
func KataTDXMachine(qemu string, memMiB uint64, vcpus, maxVCPUs int) QEMUMachine {
	return QEMUMachine{Binary: qemu, Machine: "q35,kernel-irqchip=split,smm=off,pic=off", MemoryMiB: memMiB, VCPUs: vcpus, MaxVCPUs: maxVCPUs}
}

// QEMUVersion asks a QEMU binary for its version.
func QEMUVersion(ctx context.Context, qemu string) ([3]int, error) {
	var v [3]int
	out, err := exec.CommandContext(ctx, qemu, "--version").Output()
	if err != nil {
		return v, fmt.Errorf("%s --version: %w", qemu, err)
	}
	line, _, _ := strings.Cut(string(out), "\n")
	rest, ok := strings.CutPrefix(line, "QEMU emulator version ")
	if !ok {
		return v, fmt.Errorf("%s --version printed %q, expected \"QEMU emulator version X.Y.Z\"", qemu, line)
	}
	num, _, _ := strings.Cut(rest, " ")
	parts := strings.SplitN(num, ".", 3)
	for i := range parts {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return v, fmt.Errorf("%s --version: version %q is not X.Y.Z", qemu, num)
		}
		v[i] = n
	}
	return v, nil
}
