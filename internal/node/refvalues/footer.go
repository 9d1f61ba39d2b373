package refvalues

import (
	"encoding/binary"
	"fmt"
)

// footerTableEnd is how far before the end of the image the footer table
// ends: the last 0x20 bytes hold the reset vector.
const footerTableEnd = 0x20

// guidEntryHeader is the trailer of every footer table entry: u16 length
// (of the whole entry) followed by the GUID.
const guidEntryHeader = 2 + 16

// FooterEntry is one entry of the OVMF GUIDed footer table.
type FooterEntry struct {
	GUID GUID
	// Offset is where Data starts in the image, for error messages.
	Offset int
	Data   []byte
}

// FooterTable is the OVMF GUIDed footer table, entries in the order they
// appear in the image.
type FooterTable []FooterEntry

// Lookup returns the data of the entry with the given GUID.
func (t FooterTable) Lookup(g GUID) ([]byte, bool) {
	for _, e := range t {
		if e.GUID == g {
			return e.Data, true
		}
	}
	return nil, false
}

// ParseFooterTable reads the GUIDed table that OVMF places just below the
// reset vector at the end of the image. The table ends with its own GUID
// preceded by the total length; entries are walked from the end backwards
// because each one is self-describing only at its tail.
func ParseFooterTable(fw []byte) (FooterTable, error) {
	n := len(fw)
	if n < footerTableEnd+guidEntryHeader {
		return nil, fmt.Errorf("firmware of %d bytes is too small to hold the OVMF footer table (needs at least %d)", n, footerTableEnd+guidEntryHeader)
	}
	end := n - footerTableEnd
	var g GUID
	copy(g[:], fw[end-16:end])
	if g != mustGUID(guidFooterTable) {
		return nil, fmt.Errorf("no OVMF footer table: GUID %s not found at offset %#x (found %s); is this an OVMF/TDVF image?", guidFooterTable, end-16, g)
	}
	total := int(binary.LittleEndian.Uint16(fw[end-guidEntryHeader:]))
	if total < guidEntryHeader || total > end {
		return nil, fmt.Errorf("OVMF footer table at offset %#x: length %d out of range (expected %d..%d)", end-guidEntryHeader, total, guidEntryHeader, end)
	}
	start := end - total
	var entries []FooterEntry
	pos := end - guidEntryHeader
	for pos > start {
		if pos-start < guidEntryHeader {
			return nil, fmt.Errorf("OVMF footer table: %d stray bytes at offset %#x, expected an entry of at least %d bytes", pos-start, start, guidEntryHeader)
		}
		var eg GUID
		copy(eg[:], fw[pos-16:pos])
		l := int(binary.LittleEndian.Uint16(fw[pos-guidEntryHeader:]))
		if l < guidEntryHeader || l > pos-start {
			return nil, fmt.Errorf("OVMF footer table: entry %s at offset %#x has length %d, expected %d..%d", eg, pos-guidEntryHeader, l, guidEntryHeader, pos-start)
		}
		dataStart := pos - l
		entries = append(entries, FooterEntry{GUID: eg, Offset: dataStart, Data: fw[dataStart : pos-guidEntryHeader]})
		pos = dataStart
	}
	// Walked backwards; present them in image order.
	for i, j := 0, len(entries)-1; i < j; i, j = i+1, j-1 {
		entries[i], entries[j] = entries[j], entries[i]
	}
	return entries, nil
}

// footerU32 reads a u32 at index i of a footer entry's data.
func footerU32(t FooterTable, guid, what string, i int) (uint32, error) {
	d, ok := t.Lookup(mustGUID(guid))
	if !ok {
		return 0, fmt.Errorf("firmware lacks the %s (footer table GUID %s)", what, guid)
	}
	if len(d) < 4*(i+1) {
		return 0, fmt.Errorf("firmware %s (GUID %s): entry has %d bytes of data, expected at least %d", what, guid, len(d), 4*(i+1))
	}
	return binary.LittleEndian.Uint32(d[4*i:]), nil
}
