package refvalues

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// GUID is an EFI GUID in its on-disk byte order: the first three fields
// little-endian, the last eight bytes as written. Firmware tables store GUIDs
// this way, so comparing bytes is cheaper and less error-prone than
// converting every table entry to text.
type GUID [16]byte

// The GUIDs berth looks up in firmware images. They are strings, not
// variables, so that the package keeps no mutable state; parseGUID turns them
// into bytes where needed.
const (
	// guidFooterTable marks the end of the OVMF GUIDed footer table, which
	// ends 0x20 bytes before the end of the image (just before the reset
	// vector).
	guidFooterTable = "96b582de-1fb2-45f7-baea-a366c55a082d"
	// guidSEVMetadata points at the OVMF SEV metadata ("ASEV"): a u32
	// offset from the end of the image.
	guidSEVMetadata = "dc886566-984a-4798-a75e-5585a7bf67cc"
	// guidSEVHashTable locates QEMU's SEV hashes table: u32 GPA, u32 size.
	guidSEVHashTable = "7255371f-3a3b-4b04-927b-1da6efa8d454"
	// guidSEVESResetBlock gives the reset vector of the application
	// processors: u32 address.
	guidSEVESResetBlock = "00f771de-1a7e-4fcb-890e-68c77e2fb44e"
	// guidTDXMetadata points at the TDVF metadata ("TDVF"): a u32 offset
	// from the end of the image.
	guidTDXMetadata = "e47a6535-984a-4798-865e-4685a7bf8ec2"

	// The SEV hashes table written by QEMU for measured direct boot: the
	// table itself and one entry per component.
	guidHashTable   = "9438d606-4f22-4cc9-b479-a793d411fd21"
	guidHashCmdline = "97d02dd8-bd20-4c94-aa78-e7714d36ab2a"
	guidHashInitrd  = "44baf731-3a2f-4bd7-9af1-41e29169781d"
	guidHashKernel  = "4de79437-abd2-427f-b835-d5b172d2045b"
)

// ParseGUID parses the canonical textual form
// xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func ParseGUID(s string) (GUID, error) {
	var g GUID
	parts := strings.Split(s, "-")
	if len(parts) != 5 || len(parts[0]) != 8 || len(parts[1]) != 4 || len(parts[2]) != 4 || len(parts[3]) != 4 || len(parts[4]) != 12 {
		return g, fmt.Errorf("GUID %q: expected the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", s)
	}
	raw, err := hex.DecodeString(strings.Join(parts, ""))
	if err != nil {
		return g, fmt.Errorf("GUID %q: %w", s, err)
	}
	binary.LittleEndian.PutUint32(g[0:], binary.BigEndian.Uint32(raw[0:]))
	binary.LittleEndian.PutUint16(g[4:], binary.BigEndian.Uint16(raw[4:]))
	binary.LittleEndian.PutUint16(g[6:], binary.BigEndian.Uint16(raw[6:]))
	copy(g[8:], raw[8:])
	return g, nil
}

// mustGUID is for the constants above, which are known to be well formed.
func mustGUID(s string) GUID {
	g, err := ParseGUID(s)
	if err != nil {
		panic(err)
	}
	return g
}

// String returns the canonical lowercase textual form.
func (g GUID) String() string {
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x",
		binary.LittleEndian.Uint32(g[0:]), binary.LittleEndian.Uint16(g[4:]),
		binary.LittleEndian.Uint16(g[6:]), g[8:10], g[10:])
}
