package refvalues

import (
	"encoding/binary"
	"fmt"
	"sort"
)

const (
	pageSize = 4096
	// fourGiB is where the firmware image ends in guest physical memory:
	// QEMU maps the flash so that its last byte is at 4 GiB - 1.
	fourGiB = 1 << 32
	// maxFirmwareSize bounds what is read into memory; real images are 2 to
	// 8 MiB.
	maxFirmwareSize = 64 << 20
)

// SEVSectionType is the type of an OVMF SEV metadata section, which decides
// how the page is given to SNP_LAUNCH_UPDATE.
type SEVSectionType uint32

// Section types defined by OVMF (OvmfPkg/ResetVector, SEV metadata).
const (
	SEVSectionZero         SEVSectionType = 1    // pre-validated memory, measured as zero pages
	SEVSectionSecrets      SEVSectionType = 2    // the SNP secrets page
	SEVSectionCPUID        SEVSectionType = 3    // the SNP CPUID page
	SEVSectionSVSMCAA      SEVSectionType = 4    // the SVSM calling area, measured as zero pages
	SEVSectionKernelHashes SEVSectionType = 0x10 // where QEMU writes the SEV hashes table
)

// String names the section type as OVMF does.
func (t SEVSectionType) String() string {
	switch t {
	case SEVSectionZero:
		return "SNP_SEC_MEM"
	case SEVSectionSecrets:
		return "SNP_SECRETS"
	case SEVSectionCPUID:
		return "CPUID"
	case SEVSectionSVSMCAA:
		return "SVSM_CAA"
	case SEVSectionKernelHashes:
		return "SNP_KERNEL_HASHES"
	}
	return fmt.Sprintf("unknown(%#x)", uint32(t))
}

// SEVSection is one entry of the OVMF SEV metadata.
type SEVSection struct {
	GPA  uint64
	Size uint64
	Type SEVSectionType
}

// OVMF is what the SNP launch measurement needs from an AmdSev OVMF image.
type OVMF struct {
	// Image is the whole firmware file, mapped to end at 4 GiB.
	Image []byte
	// Sections are the SEV metadata sections in the order OVMF lists them,
	// which is the order QEMU measures them in.
	Sections []SEVSection
	// ResetEIP is the entry point of the application processors, from the
	// SEV-ES reset block.
	ResetEIP uint32
	// HashTableGPA and HashTableSize locate the SEV hashes table; zero when
	// the image does not support measured direct boot.
	HashTableGPA, HashTableSize uint32
}

// GPA is the guest physical address of the first byte of the image.
func (o *OVMF) GPA() uint64 { return fourGiB - uint64(len(o.Image)) }

// checkImage rejects images that cannot be mapped below 4 GiB page by page.
func checkImage(fw []byte) error {
	switch {
	case len(fw) == 0:
		return fmt.Errorf("firmware is empty")
	case len(fw) > maxFirmwareSize:
		return fmt.Errorf("firmware of %d bytes is larger than the %d bytes a flash image can have", len(fw), maxFirmwareSize)
	case len(fw)%pageSize != 0:
		return fmt.Errorf("firmware of %d bytes is not a whole number of %d-byte pages (truncated?)", len(fw), pageSize)
	}
	return nil
}

// ParseOVMF reads the SEV metadata, the SEV-ES reset block and the hashes
// table location from an OVMF image. The image is kept, not copied.
func ParseOVMF(fw []byte) (*OVMF, error) {
	if err := checkImage(fw); err != nil {
		return nil, err
	}
	table, err := ParseFooterTable(fw)
	if err != nil {
		return nil, err
	}
	o := &OVMF{Image: fw}
	if o.ResetEIP, err = footerU32(table, guidSEVESResetBlock, "SEV-ES reset block", 0); err != nil {
		return nil, err
	}
	off, err := footerU32(table, guidSEVMetadata, "SEV metadata", 0)
	if err != nil {
		return nil, err
	}
	if o.Sections, err = parseSEVMetadata(fw, off); err != nil {
		return nil, err
	}
	if d, ok := table.Lookup(mustGUID(guidSEVHashTable)); ok {
		if len(d) < 8 {
			return nil, fmt.Errorf("SEV hashes table entry (GUID %s) has %d bytes of data, expected 8", guidSEVHashTable, len(d))
		}
		o.HashTableGPA = binary.LittleEndian.Uint32(d)
		o.HashTableSize = binary.LittleEndian.Uint32(d[4:])
	}
	return o, nil
}

// parseSEVMetadata decodes the "ASEV" header and its 12-byte section
// descriptors found off bytes before the end of the image.
func parseSEVMetadata(fw []byte, off uint32) ([]SEVSection, error) {
	const hdr, item = 16, 12
	if off < hdr || int64(off) > int64(len(fw)) {
		return nil, fmt.Errorf("SEV metadata offset %#x (GUID %s) is outside the %d-byte image", off, guidSEVMetadata, len(fw))
	}
	base := len(fw) - int(off)
	if string(fw[base:base+4]) != "ASEV" {
		return nil, fmt.Errorf("SEV metadata at offset %#x: signature %q, expected \"ASEV\"", base, fw[base:base+4])
	}
	size := binary.LittleEndian.Uint32(fw[base+4:])
	version := binary.LittleEndian.Uint32(fw[base+8:])
	count := binary.LittleEndian.Uint32(fw[base+12:])
	if version != 1 {
		return nil, fmt.Errorf("SEV metadata at offset %#x: version %d, expected 1", base, version)
	}
	if count == 0 || count > 64 || size != hdr+item*count {
		return nil, fmt.Errorf("SEV metadata at offset %#x: length %d with %d sections, expected length %d and 1..64 sections", base, size, count, hdr+item*count)
	}
	if int64(base)+int64(size) > int64(len(fw)) {
		return nil, fmt.Errorf("SEV metadata at offset %#x: %d bytes run past the end of the image", base, size)
	}
	secs := make([]SEVSection, count)
	for i := range secs {
		p := base + hdr + item*i
		s := SEVSection{
			GPA:  uint64(binary.LittleEndian.Uint32(fw[p:])),
			Size: uint64(binary.LittleEndian.Uint32(fw[p+4:])),
			Type: SEVSectionType(binary.LittleEndian.Uint32(fw[p+8:])),
		}
		switch s.Type {
		case SEVSectionZero, SEVSectionSecrets, SEVSectionCPUID, SEVSectionSVSMCAA, SEVSectionKernelHashes:
		default:
			return nil, fmt.Errorf("SEV metadata section %d: unknown type %#x", i, uint32(s.Type))
		}
		// OVMF emits unused sections (for example SVSM_CAA in builds
		// without an SVSM) with size 0; QEMU measures nothing for them.
		if s.GPA%pageSize != 0 || s.Size%pageSize != 0 {
			return nil, fmt.Errorf("SEV metadata section %d (%s): GPA %#x size %#x, expected %d-byte aligned", i, s.Type, s.GPA, s.Size, pageSize)
		}
		if s.GPA+s.Size > fourGiB-uint64(len(fw)) {
			return nil, fmt.Errorf("SEV metadata section %d (%s): [%#x, %#x) reaches into the firmware mapped at %#x", i, s.Type, s.GPA, s.GPA+s.Size, fourGiB-uint64(len(fw)))
		}
		secs[i] = s
	}
	if err := checkOverlap(len(secs), func(i int) (uint64, uint64, string) {
		return secs[i].GPA, secs[i].Size, fmt.Sprintf("SEV metadata section %d (%s)", i, secs[i].Type)
	}); err != nil {
		return nil, err
	}
	return secs, nil
}

// checkOverlap reports the first two of n ranges [gpa, gpa+size) that
// overlap. Ranges sorted by start overlap exactly when one starts before
// its predecessor ends.
func checkOverlap(n int, at func(int) (gpa, size uint64, name string)) error {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		ga, _, _ := at(idx[a])
		gb, _, _ := at(idx[b])
		return ga < gb
	})
	prev := -1
	for _, k := range idx {
		g, s, name := at(k)
		if s == 0 {
			continue // an empty range overlaps nothing
		}
		if prev >= 0 {
			pg, ps, pn := at(prev)
			if g < pg+ps {
				return fmt.Errorf("%s [%#x, %#x) overlaps %s [%#x, %#x)", name, g, g+s, pn, pg, pg+ps)
			}
		}
		prev = k
	}
	return nil
}
