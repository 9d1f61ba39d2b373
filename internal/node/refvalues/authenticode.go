package refvalues

import (
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"sort"
)

// maxKernelSize bounds a kernel image: real x86 bzImages are tens of MiB;
// anything far larger is not a kernel and would only cost memory.
const maxKernelSize = 512 << 20

// PEImage is what the Authenticode digest needs from a PE/COFF file: the
// byte ranges the firmware hashes when it measures the image.
type PEImage struct {
	data []byte
	// checksumOff is the file offset of the optional header's CheckSum.
	checksumOff int
	// secDirOff is the file offset of the Certificate Table data
	// directory entry, or -1 when the image has no such entry.
	secDirOff int
	// certSize is the Certificate Table size (0 when absent).
	certSize uint32
	// headersSize is SizeOfHeaders.
	headersSize uint32
	// sections are the (offset, size) raw-data ranges with data, sorted by
	// file offset as the firmware hashes them.
	sections [][2]uint32
}

// ParsePE reads the headers of a PE/COFF image (an EFI-stub Linux kernel)
// and checks that every range Authenticode hashes lies inside the file. The
// data is kept, not copied.
func ParsePE(data []byte) (*PEImage, error) {
	if len(data) > maxKernelSize {
		return nil, fmt.Errorf("kernel of %d bytes is larger than the %d bytes a kernel image can have", len(data), maxKernelSize)
	}
	if len(data) < 0x40 || data[0] != 'M' || data[1] != 'Z' {
		return nil, fmt.Errorf("not a PE/COFF image: no \"MZ\" DOS header at offset 0 (a direct-boot TDX kernel must be an EFI-stub bzImage)")
	}
	peOff := int(binary.LittleEndian.Uint32(data[0x3c:]))
	if peOff < 0x40 || peOff > len(data)-24 {
		return nil, fmt.Errorf("not a PE/COFF image: e_lfanew %#x at offset 0x3c points outside the %d-byte file", peOff, len(data))
	}
	if string(data[peOff:peOff+4]) != "PE\x00\x00" {
		return nil, fmt.Errorf("not a PE/COFF image: no \"PE\\0\\0\" signature at offset %#x (e_lfanew); a kernel without the EFI stub (CONFIG_EFI_STUB) cannot be measured by TDVF", peOff)
	}
	coff := peOff + 4
	nSections := int(binary.LittleEndian.Uint16(data[coff+2:]))
	optSize := int(binary.LittleEndian.Uint16(data[coff+16:]))
	opt := coff + 20
	if optSize < 2 || opt+optSize > len(data) {
		return nil, fmt.Errorf("PE image: optional header of %d bytes at offset %#x runs past the end of the %d-byte file", optSize, opt, len(data))
	}
	var ddOff, nRVAOff int
	switch magic := binary.LittleEndian.Uint16(data[opt:]); magic {
	case 0x10b: // PE32
		ddOff, nRVAOff = 96, 92
	case 0x20b: // PE32+
		ddOff, nRVAOff = 112, 108
	default:
		return nil, fmt.Errorf("PE image: optional header magic %#x at offset %#x, expected 0x10b (PE32) or 0x20b (PE32+)", magic, opt)
	}
	if optSize < ddOff {
		return nil, fmt.Errorf("PE image: optional header of %d bytes is too short for its data directories (%d bytes)", optSize, ddOff)
	}
	img := &PEImage{data: data, checksumOff: opt + 64, secDirOff: -1}
	img.headersSize = binary.LittleEndian.Uint32(data[opt+60:])
	nRVA := binary.LittleEndian.Uint32(data[opt+nRVAOff:])
	const securityDir = 4
	if nRVA > securityDir {
		img.secDirOff = opt + ddOff + securityDir*8
		if img.secDirOff+8 > opt+optSize {
			return nil, fmt.Errorf("PE image: %d data directories do not fit the %d-byte optional header", nRVA, optSize)
		}
		img.certSize = binary.LittleEndian.Uint32(data[img.secDirOff+4:])
	}
	secTable := opt + optSize
	if nSections == 0 || secTable+40*nSections > len(data) {
		return nil, fmt.Errorf("PE image: %d section headers at offset %#x do not fit the %d-byte file", nSections, secTable, len(data))
	}
	if uint64(img.headersSize) > uint64(len(data)) || int(img.headersSize) < img.checksumOff+4 || (img.secDirOff >= 0 && int(img.headersSize) < img.secDirOff+8) {
		return nil, fmt.Errorf("PE image: SizeOfHeaders %#x does not cover the headers or runs past the end of the %d-byte file", img.headersSize, len(data))
	}
	for i := range nSections {
		s := secTable + 40*i
		size := binary.LittleEndian.Uint32(data[s+16:])
		off := binary.LittleEndian.Uint32(data[s+20:])
		if size == 0 {
			continue
		}
		if uint64(off)+uint64(size) > uint64(len(data)) {
			return nil, fmt.Errorf("PE image: section %d (%q) raw data [%#x, %#x) runs past the end of the %d-byte file (truncated?)", i, cString(data[s:s+8]), off, uint64(off)+uint64(size), len(data))
		}
		img.sections = append(img.sections, [2]uint32{off, size})
	}
	sort.SliceStable(img.sections, func(a, b int) bool { return img.sections[a][0] < img.sections[b][0] })
	var hashed uint64 = uint64(img.headersSize)
	for _, s := range img.sections {
		hashed += uint64(s[1])
	}
	if uint64(len(data)) > hashed && uint64(len(data)) < hashed+uint64(img.certSize) {
		return nil, fmt.Errorf("PE image: certificate table of %d bytes does not fit the %d bytes after the sections", img.certSize, uint64(len(data))-hashed)
	}
	return img, nil
}

// cString returns b up to its first NUL.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// Authenticode returns the SHA-384 Authenticode digest the firmware extends
// for the image: the headers without CheckSum and the Certificate Table
// entry, the section data in file order, then the bytes after the sections
// less the certificate table (PE/COFF specification, "Calculating the PE
// Image Hash", as edk2's measured boot implements it).
func (p *PEImage) Authenticode() Digest384 {
	h := sha512.New384()
	d := p.data
	h.Write(d[:p.checksumOff])
	if p.secDirOff < 0 {
		h.Write(d[p.checksumOff+4 : p.headersSize])
	} else {
		h.Write(d[p.checksumOff+4 : p.secDirOff])
		h.Write(d[p.secDirOff+8 : p.headersSize])
	}
	hashed := uint64(p.headersSize)
	for _, s := range p.sections {
		h.Write(d[s[0] : s[0]+s[1]])
		hashed += uint64(s[1])
	}
	if n := uint64(len(d)); n > hashed+uint64(p.certSize) {
		h.Write(d[hashed : n-uint64(p.certSize)])
	}
	var out Digest384
	h.Sum(out[:0])
	return out
}

// Linux x86 boot protocol setup-header fields QEMU writes before version 10
// (Documentation/arch/x86/boot.rst).
const (
	setupTypeOfLoader = 0x210
	setupLoadFlags    = 0x211
	setupRamdiskImage = 0x218
	setupRamdiskSize  = 0x21c
	setupHeapEndPtr   = 0x224
	setupCmdLinePtr   = 0x228
	setupInitrdMax    = 0x22c
	setupVersion      = 0x206
	setupXLoadFlags   = 0x236
	// xlfCanBeLoadedAbove4G is the xloadflags bit of a kernel that accepts
	// its initrd above 4 GiB (boot protocol 2.12).
	xlfCanBeLoadedAbove4G = 1 << 1
	setupHdrS             = 0x202
)

// Linux x86 boot protocol fields that size a bzImage: the real-mode
// setup's sectors beyond the boot sector (0 means 4) and the
// protected-mode kernel in 16-byte units (16 bits before protocol 2.04).
const (
	setupSects   = 0x1f1
	setupSysSize = 0x1f4
)

// kernelHead is how much of a kernel checkSetup reads: the setup header
// ends well before 1 KiB.
const kernelHead = 1024

// checkSetup refuses a kernel whose Linux x86 setup header ("HdrS" at
// 0x202; a file without one is left to the caller) describes more than
// the size-byte file holds. QEMU's -kernel loader takes setup_sects+1
// sectors of real-mode setup and then the protected-mode kernel, and
// exits with "invalid kernel header" when the setup runs past the end
// (hw/i386/x86.c): no guest boots such a file, so no value measured
// from it can be right. syssize is allowed the up to 15 bytes its
// rounding to 16-byte units adds (arch/x86/boot/tools/build.c).
func checkSetup(head []byte, size int64) error {
	if len(head) < setupVersion+2 || string(head[setupHdrS:setupHdrS+4]) != "HdrS" {
		return nil
	}
	sects := int64(head[setupSects])
	if sects == 0 {
		sects = 4
	}
	setup := (sects + 1) * 512
	if setup > size {
		return fmt.Errorf("kernel setup area of %d bytes (setup_sects %d at offset %#x) runs past the end of the %d-byte file: not a whole bzImage (QEMU refuses it as an invalid kernel header)", setup, head[setupSects], setupSects, size)
	}
	sys := int64(binary.LittleEndian.Uint16(head[setupSysSize:]))
	if binary.LittleEndian.Uint16(head[setupVersion:]) >= 0x204 {
		sys = int64(binary.LittleEndian.Uint32(head[setupSysSize:]))
	}
	if sys == 0 || sys*16 > size-setup+15 {
		return fmt.Errorf("kernel: protected-mode part of %d bytes (syssize %#x at offset %#x) does not fit the %d bytes after the %d-byte setup area: not a whole bzImage (truncated?)", sys*16, sys, setupSysSize, size-setup, setup)
	}
	return nil
}

// qemuSetupPatch is what QEMU before 10.0 writes into the kernel's setup
// header when it loads a bzImage for -kernel (hw/i386/x86.c), and what the
// firmware then measures because it receives that patched copy.
type qemuSetupPatch struct {
	// initrdAddr and initrdSize are 0 without an initrd.
	initrdAddr, initrdSize uint32
}

// qemuACPIDataSize is the memory QEMU keeps free below the top of low RAM
// for firmware data; the initrd is placed below it: 0x20000 + 0x8000 for
// the pc and q35 machine types (QEMU 10.0 hw/i386/pc.c PC_FW_DATA, 7.2's
// acpi_data_size), as the FW_CFG_INITRD_ADDR of Debian's QEMU 7.2 shows
// (TestBootBlobsModel). 0x20000 placed every initrd 32 KiB too high.
const qemuACPIDataSize = 0x28000

// qemuInitrdAddr places an initrd of size bytes as QEMU before 10.0 does:
// page aligned, as high as the kernel's initrd_addr_max and the low RAM
// below the ACPI data allow.
func qemuInitrdAddr(kernel []byte, size uint32, lowMem uint64) (uint32, error) {
	protocol := binary.LittleEndian.Uint16(kernel[setupVersion:])
	initrdMax := uint64(0x37ffffff)
	switch {
	case protocol >= 0x20c && len(kernel) >= setupXLoadFlags+2 && binary.LittleEndian.Uint16(kernel[setupXLoadFlags:])&xlfCanBeLoadedAbove4G != 0:
		// A kernel that takes its initrd anywhere gets it at the top of
		// low RAM, not below its initrd_addr_max (QEMU 7.2 and 10 do
		// so alike, as their FW_CFG_INITRD_ADDR for a 2815 MiB guest
		// shows: TestBootBlobsModel).
		initrdMax = 1<<32 - 1
	case protocol >= 0x203:
		initrdMax = uint64(binary.LittleEndian.Uint32(kernel[setupInitrdMax:]))
	}
	if initrdMax >= lowMem-qemuACPIDataSize {
		initrdMax = lowMem - qemuACPIDataSize - 1
	}
	if uint64(size) >= initrdMax {
		return 0, fmt.Errorf("initrd of %d bytes does not fit below %#x, the highest address QEMU loads it to with this memory size", size, initrdMax)
	}
	return uint32((initrdMax - uint64(size)) &^ 0xfff), nil
}

// patchSetupHeader returns a copy of a bzImage with the setup header as QEMU
// before 10.0 hands it to the firmware: loader type QEMU, heap usable with
// its end below the command line, command line at 0x20000 and the initrd
// location. Kernels older than boot protocol 2.02 or not loaded high are
// refused: no EFI-stub kernel is either.
func patchSetupHeader(kernel []byte, p qemuSetupPatch) ([]byte, error) {
	if len(kernel) < setupInitrdMax+4 || string(kernel[setupHdrS:setupHdrS+4]) != "HdrS" {
		return nil, fmt.Errorf("kernel has no Linux x86 setup header (\"HdrS\" at offset %#x): QEMU before 10.0 patches that header, so the kernel must be a bzImage", setupHdrS)
	}
	protocol := binary.LittleEndian.Uint16(kernel[setupVersion:])
	if protocol < 0x202 || kernel[setupLoadFlags]&0x01 == 0 {
		return nil, fmt.Errorf("kernel boot protocol %d.%02d (loadflags %#x): expected >= 2.02 and loaded high, as every EFI-stub kernel is", protocol>>8, protocol&0xff, kernel[setupLoadFlags])
	}
	out := make([]byte, len(kernel))
	copy(out, kernel)
	const realAddr, cmdlineAddr = 0x10000, 0x20000
	out[setupTypeOfLoader] = 0xb0
	out[setupLoadFlags] |= 0x80 // CAN_USE_HEAP
	binary.LittleEndian.PutUint16(out[setupHeapEndPtr:], cmdlineAddr-realAddr-0x200)
	binary.LittleEndian.PutUint32(out[setupCmdLinePtr:], cmdlineAddr)
	if p.initrdSize > 0 {
		binary.LittleEndian.PutUint32(out[setupRamdiskImage:], p.initrdAddr)
		binary.LittleEndian.PutUint32(out[setupRamdiskSize:], p.initrdSize)
	}
	return out, nil
}
