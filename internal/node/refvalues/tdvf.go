package refvalues

import (
	"encoding/binary"
	"fmt"
)

// TDVFSectionType is the type of a TDVF metadata section (TDVF design
// guide, section "TDVF metadata").
type TDVFSectionType uint32

// Section types from the TDVF design guide.
const (
	TDVFSectionBFV          TDVFSectionType = 0 // boot firmware volume (code)
	TDVFSectionCFV          TDVFSectionType = 1 // configuration firmware volume (variables)
	TDVFSectionTDHOB        TDVFSectionType = 2 // hand-off block built by the VMM
	TDVFSectionTempMem      TDVFSectionType = 3 // temporary memory for the firmware
	TDVFSectionPermMem      TDVFSectionType = 4 // permanent memory, accepted later
	TDVFSectionPayload      TDVFSectionType = 5 // a payload (kernel)
	TDVFSectionPayloadParam TDVFSectionType = 6 // payload parameters
)

// String names the section type as the design guide does.
func (t TDVFSectionType) String() string {
	switch t {
	case TDVFSectionBFV:
		return "BFV"
	case TDVFSectionCFV:
		return "CFV"
	case TDVFSectionTDHOB:
		return "TD_HOB"
	case TDVFSectionTempMem:
		return "TempMem"
	case TDVFSectionPermMem:
		return "PermMem"
	case TDVFSectionPayload:
		return "Payload"
	case TDVFSectionPayloadParam:
		return "PayloadParam"
	}
	return fmt.Sprintf("unknown(%d)", uint32(t))
}

// Section attributes.
const (
	// TDVFAttrMRExtend asks the VMM to extend the section's content into
	// MRTD with TDH.MR.EXTEND.
	TDVFAttrMRExtend = 1 << 0
	// TDVFAttrPageAug marks memory the guest accepts itself later
	// (TDH.MEM.PAGE.AUG): it is not added at build time and not measured.
	TDVFAttrPageAug = 1 << 1
)

// maxTDVFBuildMemory bounds the memory the VMM adds page by page before the
// TD starts; real images add a few MiB, and an absurd value would make MRTD
// hash for minutes.
const maxTDVFBuildMemory = 1 << 32

// TDVFSection is one section descriptor of the TDVF metadata.
type TDVFSection struct {
	DataOffset uint32 // where the raw data starts in the image
	RawSize    uint32 // bytes of raw data in the image
	GPA        uint64 // guest physical address of the section
	MemSize    uint64 // bytes of guest memory the section covers
	Type       TDVFSectionType
	Attributes uint32
}

// TDVF is what MRTD needs from an IntelTdx OVMF (TDVF) image.
type TDVF struct {
	Image    []byte
	Sections []TDVFSection
}

// ParseTDVF reads the TDVF metadata from a TDVF image.
func ParseTDVF(fw []byte) (*TDVF, error) {
	if err := checkImage(fw); err != nil {
		return nil, err
	}
	table, err := ParseFooterTable(fw)
	if err != nil {
		return nil, err
	}
	off, err := footerU32(table, guidTDXMetadata, "TDX metadata (TDVF descriptor)", 0)
	if err != nil {
		return nil, err
	}
	secs, err := parseTDVFMetadata(fw, off)
	if err != nil {
		return nil, err
	}
	return &TDVF{Image: fw, Sections: secs}, nil
}

// parseTDVFMetadata decodes the "TDVF" descriptor and its 32-byte section
// entries found off bytes before the end of the image.
func parseTDVFMetadata(fw []byte, off uint32) ([]TDVFSection, error) {
	const hdr, item = 16, 32
	if off < hdr || int64(off) > int64(len(fw)) {
		return nil, fmt.Errorf("TDVF metadata offset %#x (GUID %s) is outside the %d-byte image", off, guidTDXMetadata, len(fw))
	}
	base := len(fw) - int(off)
	if string(fw[base:base+4]) != "TDVF" {
		return nil, fmt.Errorf("TDVF metadata at offset %#x: signature %q, expected \"TDVF\"", base, fw[base:base+4])
	}
	size := binary.LittleEndian.Uint32(fw[base+4:])
	version := binary.LittleEndian.Uint32(fw[base+8:])
	count := binary.LittleEndian.Uint32(fw[base+12:])
	if version != 1 {
		return nil, fmt.Errorf("TDVF metadata at offset %#x: version %d, expected 1", base, version)
	}
	if count == 0 || count > 64 || size != hdr+item*count {
		return nil, fmt.Errorf("TDVF metadata at offset %#x: length %d with %d sections, expected length %d and 1..64 sections", base, size, count, hdr+item*count)
	}
	if int64(base)+int64(size) > int64(len(fw)) {
		return nil, fmt.Errorf("TDVF metadata at offset %#x: %d bytes run past the end of the image", base, size)
	}
	secs := make([]TDVFSection, count)
	for i := range secs {
		p := base + hdr + item*i
		s := TDVFSection{
			DataOffset: binary.LittleEndian.Uint32(fw[p:]),
			RawSize:    binary.LittleEndian.Uint32(fw[p+4:]),
			GPA:        binary.LittleEndian.Uint64(fw[p+8:]),
			MemSize:    binary.LittleEndian.Uint64(fw[p+16:]),
			Type:       TDVFSectionType(binary.LittleEndian.Uint32(fw[p+24:])),
			Attributes: binary.LittleEndian.Uint32(fw[p+28:]),
		}
		name := fmt.Sprintf("TDVF metadata section %d (%s)", i, s.Type)
		if s.Type > TDVFSectionPayloadParam {
			return nil, fmt.Errorf("TDVF metadata section %d: unknown type %d", i, uint32(s.Type))
		}
		if s.Attributes&^(TDVFAttrMRExtend|TDVFAttrPageAug) != 0 {
			return nil, fmt.Errorf("%s: unknown attributes %#x", name, s.Attributes)
		}
		if s.MemSize == 0 || s.GPA%pageSize != 0 || s.MemSize%pageSize != 0 {
			return nil, fmt.Errorf("%s: GPA %#x size %#x, expected non-empty and %d-byte aligned", name, s.GPA, s.MemSize, pageSize)
		}
		if s.GPA >= 1<<52 || s.MemSize > 1<<52-s.GPA {
			return nil, fmt.Errorf("%s: [%#x, %#x) is beyond the 52-bit guest physical address space", name, s.GPA, s.GPA+s.MemSize)
		}
		if uint64(s.RawSize) > s.MemSize {
			return nil, fmt.Errorf("%s: %d bytes of raw data do not fit its %d bytes of memory", name, s.RawSize, s.MemSize)
		}
		if uint64(s.DataOffset)+uint64(s.RawSize) > uint64(len(fw)) {
			return nil, fmt.Errorf("%s: raw data [%#x, %#x) runs past the end of the %d-byte image", name, s.DataOffset, uint64(s.DataOffset)+uint64(s.RawSize), len(fw))
		}
		if s.Attributes&TDVFAttrMRExtend != 0 && s.Attributes&TDVFAttrPageAug != 0 {
			return nil, fmt.Errorf("%s: attributes %#x ask to measure memory that is only accepted later (MR.EXTEND with PAGE.AUG)", name, s.Attributes)
		}
		secs[i] = s
	}
	var added uint64
	for _, s := range secs {
		if s.Attributes&TDVFAttrPageAug == 0 {
			added += s.MemSize
		}
	}
	if added > maxTDVFBuildMemory {
		return nil, fmt.Errorf("TDVF metadata sections add %d bytes of memory at build time, more than the %d bytes a firmware can need", added, uint64(maxTDVFBuildMemory))
	}
	if err := checkOverlap(len(secs), func(i int) (uint64, uint64, string) {
		return secs[i].GPA, secs[i].MemSize, fmt.Sprintf("TDVF metadata section %d (%s)", i, secs[i].Type)
	}); err != nil {
		return nil, err
	}
	return secs, nil
}
