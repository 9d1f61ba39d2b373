package refvalues

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
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
// predicted from it, depended on CPU load. Stopped, the tables are always
// built from the chipset's reset state.
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
	if m.MemoryMiB == 0 || m.VCPUs <= 0 {
		return nil, fmt.Errorf("QEMU machine needs memory and vCPUs, got %d MiB and %d vCPUs", m.MemoryMiB, m.VCPUs)
	}
	// A QEMU that does not speak qtest as expected must not hang berth:
	// the dump takes about a second.
	ctx, cancel := context.WithTimeout(ctx, qtestTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.Binary, m.Args()...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("qtest pipe: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("qtest pipe: %w", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", m.Binary, err)
	}
	q := &qtest{w: stdin, r: bufio.NewReader(stdout)}
	if settle > 0 {
		select {
		case <-time.After(settle):
		case <-ctx.Done():
		}
	}
	blobs, derr := q.dumpACPI()
	// The qtest server keeps QEMU running after its client leaves:
	// end it once the blobs are read.
	stdin.Close()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if derr != nil {
		if s := strings.TrimSpace(stderr.String()); s != "" {
			return nil, fmt.Errorf("%s %s: %w (qemu: %s)", m.Binary, strings.Join(m.Args(), " "), derr, s)
		}
		return nil, fmt.Errorf("%s %s: %w", m.Binary, strings.Join(m.Args(), " "), derr)
	}
	return blobs, nil
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
)

// read reads n bytes of fw_cfg item sel from offset 0 by DMA.
func (q *qtest) read(sel uint16, n uint32) ([]byte, error) {
	desc := make([]byte, 16)
	binary.BigEndian.PutUint32(desc[0:], uint32(sel)<<16|fwCfgDMASelect|fwCfgDMARead)
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
	ctl, err := q.cmd("b64read %#x 4", qtestDescAddr)
	if err != nil {
		return nil, err
	}
	c, err := base64.StdEncoding.DecodeString(ctl)
	if err != nil || len(c) != 4 {
		return nil, fmt.Errorf("qtest: bad b64read answer %q", ctl)
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

func (q *qtest) dumpACPI() (*ACPIBlobs, error) {
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
	type ent struct {
		sel  uint16
		size uint32
	}
	files := map[string]ent{}
	for i := range count {
		e := dir[4+64*i:]
		files[cString(e[8:64])] = ent{sel: binary.BigEndian.Uint16(e[4:]), size: binary.BigEndian.Uint32(e)}
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
	return b, nil
}

// KataTDXMachine is the guest Kata's qemu-tdx runtime starts, as far as
// the ACPI tables see it: a q35 machine with a split IRQ chip.
func KataTDXMachine(qemu string, memMiB uint64, vcpus, maxVCPUs int) QEMUMachine {
	return QEMUMachine{Binary: qemu, Machine: "q35,kernel-irqchip=split", MemoryMiB: memMiB, VCPUs: vcpus, MaxVCPUs: maxVCPUs}
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
