package refvalues

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf16"
)

// A guest's event log says measurement by measurement what its firmware
// extended. TDVF (edk2) writes it in the TCG2 crypto-agile format (TCG PC
// Client Platform Firmware Profile: a TCG_PCClientPCREvent carrying the
// "Spec ID Event03" header, then TCG_PCR_EVENT2 records) and publishes it
// through the CCEL ACPI table. In a CC event log the first field of each
// record is the CC MR index, not a PCR: 0 MRTD, 1-4 RTMR0-3 (edk2
// MdePkg/Include/Protocol/CcMeasurement.h, TDX_MR_INDEX_*; CC_EVENT is
// "similar with TCG_PCR_EVENT2 except the field of MrIndex and PCRIndex").

// EventLogError is a malformed event log, CCEL table or quote (Input):
// Offset is the byte offset of Field in it.
type EventLogError struct {
	Input  string
	Offset int
	Field  string
	Msg    string
}

func (e *EventLogError) Error() string {
	return fmt.Sprintf("%s: offset %#x: %s: %s", e.Input, e.Offset, e.Field, e.Msg)
}

func logErr(off int, field, format string, a ...any) error {
	return &EventLogError{Input: "event log", Offset: off, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// TCG algorithm identifiers (TCG Algorithm Registry) of the digests a log
// may carry.
const (
	algSHA1   = 0x0004
	algSHA256 = 0x000b
	algSHA384 = 0x000c
	algSHA512 = 0x000d
)

// Event types (TCG PC Client PFP, section 10.4.1).
const (
	evNoAction   = 0x03
	evSeparator  = 0x04
	evEFIBase    = 0x80000000
	evEventTag   = 0x06
	maxEventLogs = 64 << 20
)

var eventTypeNames = map[uint32]string{
	0x00: "EV_PREBOOT_CERT", 0x01: "EV_POST_CODE", 0x03: "EV_NO_ACTION", 0x04: "EV_SEPARATOR",
	0x05: "EV_ACTION", 0x06: "EV_EVENT_TAG", 0x07: "EV_S_CRTM_CONTENTS", 0x08: "EV_S_CRTM_VERSION",
	0x09: "EV_CPU_MICROCODE", 0x0a: "EV_PLATFORM_CONFIG_FLAGS", 0x0b: "EV_TABLE_OF_DEVICES",
	0x0c: "EV_COMPACT_HASH", 0x0d: "EV_IPL", 0x0e: "EV_IPL_PARTITION_DATA", 0x0f: "EV_NONHOST_CODE",
	0x10: "EV_NONHOST_CONFIG", 0x11: "EV_NONHOST_INFO", 0x12: "EV_OMIT_BOOT_DEVICE_EVENTS",
	evEFIBase + 0x01: "EV_EFI_VARIABLE_DRIVER_CONFIG", evEFIBase + 0x02: "EV_EFI_VARIABLE_BOOT",
	evEFIBase + 0x03: "EV_EFI_BOOT_SERVICES_APPLICATION", evEFIBase + 0x04: "EV_EFI_BOOT_SERVICES_DRIVER",
	evEFIBase + 0x05: "EV_EFI_RUNTIME_SERVICES_DRIVER", evEFIBase + 0x06: "EV_EFI_GPT_EVENT",
	evEFIBase + 0x07: "EV_EFI_ACTION", evEFIBase + 0x08: "EV_EFI_PLATFORM_FIRMWARE_BLOB",
	evEFIBase + 0x09: "EV_EFI_HANDOFF_TABLES", evEFIBase + 0x0a: "EV_EFI_PLATFORM_FIRMWARE_BLOB2",
	evEFIBase + 0x0b: "EV_EFI_HANDOFF_TABLES2", evEFIBase + 0x0c: "EV_EFI_VARIABLE_BOOT2",
	evEFIBase + 0x10: "EV_EFI_HCRTM_EVENT", evEFIBase + 0xe0: "EV_EFI_VARIABLE_AUTHORITY",
	evEFIBase + 0xe1: "EV_EFI_SPDM_FIRMWARE_BLOB", evEFIBase + 0xe2: "EV_EFI_SPDM_FIRMWARE_CONFIG",
}

// EventTypeName is the TCG name of an event type, or its number in hex.
func EventTypeName(t uint32) string {
	if n, ok := eventTypeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("%#x", t)
}

// LogAlgorithm is one digest algorithm the log header declares.
type LogAlgorithm struct {
	ID   uint16 `json:"id"`
	Size int    `json:"size"`
}

// LogEvent is one TCG_PCR_EVENT2 record.
type LogEvent struct {
	// Seq is the record's position in the log (0 is the header event).
	Seq    int `json:"seq"`
	Offset int `json:"offset"`
	// MRIndex is the record's first field: the CC MR index (1-4: RTMR0-3).
	MRIndex uint32    `json:"mrIndex"`
	Type    uint32    `json:"type"`
	SHA384  Digest384 `json:"sha384"`
	Data    []byte    `json:"-"`
}

// RTMR is the RTMR the event extends, or -1 for MRTD (index 0) and
// events that extend nothing.
func (e LogEvent) RTMR() int {
	if e.Type == evNoAction || e.MRIndex < 1 || e.MRIndex > 4 {
		return -1
	}
	return int(e.MRIndex) - 1
}

// EventLog is a parsed crypto-agile event log.
type EventLog struct {
	Algorithms []LogAlgorithm `json:"algorithms"`
	Events     []LogEvent     `json:"events"`
	// Size is the number of bytes the records occupy, without padding.
	Size int `json:"size"`
}

type logReader struct {
	b   []byte
	off int
}

func (r *logReader) u32(field string) (uint32, error) {
	if len(r.b)-r.off < 4 {
		return 0, logErr(r.off, field, "needs 4 bytes, %d left", len(r.b)-r.off)
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v, nil
}

func (r *logReader) bytes(n int, field string) ([]byte, error) {
	if n < 0 || len(r.b)-r.off < n {
		return nil, logErr(r.off, field, "needs %d bytes, %d left", n, len(r.b)-r.off)
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v, nil
}

// isPadding reports whether b holds only one repeated 0x00 or 0xFF: the CCEL
// log area past the last record (edk2 fills it with 0xFF).
func isPadding(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	if b[0] != 0 && b[0] != 0xff {
		return false
	}
	return len(bytes.Trim(b, string(b[:1]))) == 0
}

// ParseEventLog parses a TCG2 crypto-agile (or CC) event log: the
// TCG_PCClientPCREvent header with the Spec ID Event03, then TCG_PCR_EVENT2
// records up to the end or to padding. It refuses a malformed log with the
// offset and field at fault and a log without SHA-384 digests.
func ParseEventLog(b []byte) (*EventLog, error) {
	return parseEventLog(b, 4)
}

// ParseTPMEventLog parses a TPM's TCG2 crypto-agile event log (a
// firmware's binary_bios_measurements): as ParseEventLog, but its first
// field is a PCR index (0-23) rather than a CC MR index. RTMR() of its
// events means nothing; TDVF's mapping is PCRToRTMR.
func ParseTPMEventLog(b []byte) (*EventLog, error) {
	return parseEventLog(b, 23)
}

// parseEventLog parses a log whose index field may be at most maxIndex.
func parseEventLog(b []byte, maxIndex uint32) (*EventLog, error) {
	if len(b) > maxEventLogs {
		return nil, logErr(0, "log", "%d bytes is more than the %d an event log may hold", len(b), maxEventLogs)
	}
	r := &logReader{b: b}
	// TCG_PCClientPCREvent: pcrIndex, eventType, SHA-1 digest[20], eventSize, event.
	if _, err := r.u32("header pcrIndex"); err != nil {
		return nil, err
	}
	typ, err := r.u32("header eventType")
	if err != nil {
		return nil, err
	}
	if typ != evNoAction {
		return nil, logErr(4, "header eventType", "is %s, expected EV_NO_ACTION: not a crypto-agile log", EventTypeName(typ))
	}
	if _, err := r.bytes(20, "header digest"); err != nil {
		return nil, err
	}
	size, err := r.u32("header eventSize")
	if err != nil {
		return nil, err
	}
	specOff := r.off
	spec, err := r.bytes(int(min(size, uint32(len(b)))), "header event")
	if err != nil || size > uint32(len(b)) {
		return nil, logErr(specOff-4, "header eventSize", "%d runs past the end of the log (%d bytes)", size, len(b))
	}
	algs, err := parseSpecID(spec, specOff)
	if err != nil {
		return nil, err
	}
	log := &EventLog{Algorithms: algs}
	sizes := map[uint16]int{}
	for _, a := range algs {
		sizes[a.ID] = a.Size
	}
	if _, ok := sizes[algSHA384]; !ok {
		return nil, logErr(specOff+24, "numberOfAlgorithms", "the log declares no SHA-384 digests (TDX RTMRs are SHA-384)")
	}
	for seq := 1; r.off < len(b); seq++ {
		start := r.off
		if len(b)-start < 8 || isPadding(b[start:start+8]) {
			if !isPadding(b[start:]) {
				return nil, logErr(start, "padding", "log continues after an empty record header")
			}
			break
		}
		ev := LogEvent{Seq: seq, Offset: start}
		if ev.MRIndex, err = r.u32("mrIndex"); err != nil {
			return nil, err
		}
		if ev.Type, err = r.u32("eventType"); err != nil {
			return nil, err
		}
		n, err := r.u32("digests.count")
		if err != nil {
			return nil, err
		}
		if int(n) != len(algs) {
			return nil, logErr(r.off-4, "digests.count", "event %d carries %d digests, the header declares %d algorithms", seq, n, len(algs))
		}
		have384 := false
		for range n {
			idOff := r.off
			if len(b)-r.off < 2 {
				return nil, logErr(r.off, "digests.hashAlg", "needs 2 bytes, %d left", len(b)-r.off)
			}
			id := binary.LittleEndian.Uint16(b[r.off:])
			r.off += 2
			sz, ok := sizes[id]
			if !ok {
				return nil, logErr(idOff, "digests.hashAlg", "event %d: algorithm %#04x is not declared in the header", seq, id)
			}
			d, err := r.bytes(sz, "digests.digest")
			if err != nil {
				return nil, err
			}
			if id == algSHA384 {
				copy(ev.SHA384[:], d)
				have384 = true
			}
		}
		if !have384 {
			return nil, logErr(start, "digests", "event %d has no SHA-384 digest", seq)
		}
		es, err := r.u32("eventSize")
		if err != nil {
			return nil, err
		}
		if ev.Data, err = r.bytes(int(min(es, uint32(len(b)))), "event"); err != nil || es > uint32(len(b)) {
			return nil, logErr(r.off-4, "eventSize", "event %d: %d bytes run past the end of the log", seq, es)
		}
		if ev.MRIndex > maxIndex && ev.Type != evNoAction {
			if maxIndex == 4 {
				return nil, logErr(start, "mrIndex", "event %d: MR index %d, expected 0 (MRTD) to 4 (RTMR3)", seq, ev.MRIndex)
			}
			return nil, logErr(start, "pcrIndex", "event %d: PCR %d, expected 0 to %d", seq, ev.MRIndex, maxIndex)
		}
		log.Events = append(log.Events, ev)
		log.Size = r.off
	}
	return log, nil
}

// parseSpecID parses TCG_EfiSpecIdEvent: signature[16] "Spec ID Event03",
// platformClass u32, version u8 x3, uintnSize u8, numberOfAlgorithms u32,
// {algorithmId u16, digestSize u16}[], vendorInfoSize u8, vendorInfo.
func parseSpecID(b []byte, base int) ([]LogAlgorithm, error) {
	if len(b) < 28 || string(b[:16]) != "Spec ID Event03\x00" {
		return nil, logErr(base, "Spec ID signature", "expected \"Spec ID Event03\": not a crypto-agile log")
	}
	n := binary.LittleEndian.Uint32(b[24:])
	if n == 0 || uint64(n) > uint64(len(b)-28)/4 {
		return nil, logErr(base+24, "numberOfAlgorithms", "%d does not fit the %d-byte header event", n, len(b))
	}
	var algs []LogAlgorithm
	for i := range int(n) {
		p := 28 + 4*i
		a := LogAlgorithm{ID: binary.LittleEndian.Uint16(b[p:]), Size: int(binary.LittleEndian.Uint16(b[p+2:]))}
		want := map[uint16]int{algSHA1: 20, algSHA256: 32, algSHA384: 48, algSHA512: 64}[a.ID]
		if want != 0 && a.Size != want {
			return nil, logErr(base+p+2, "digestSize", "algorithm %#04x has %d-byte digests, expected %d", a.ID, a.Size, want)
		}
		if a.Size == 0 || a.Size > 64 {
			return nil, logErr(base+p+2, "digestSize", "algorithm %#04x: %d bytes is no digest size", a.ID, a.Size)
		}
		algs = append(algs, a)
	}
	return algs, nil
}

// Replay extends each event's SHA-384 digest into RTMR0-3 as the TDX
// module does: RTMR = SHA-384(RTMR || digest), from zero.
func (l *EventLog) Replay() [4]Digest384 {
	var mr [4]Digest384
	for _, e := range l.Events {
		if i := e.RTMR(); i >= 0 {
			extend(&mr[i], e.SHA384)
		}
	}
	return mr
}

// CCELTable is the CC event log ACPI table (ACPI 6.5, 5.2.34): the guest
// exposes it as /sys/firmware/acpi/tables/CCEL and its log area as
// /sys/firmware/acpi/tables/data/CCEL.
type CCELTable struct {
	CCType    uint8  `json:"ccType"`
	CCSubType uint8  `json:"ccSubType"`
	LAML      uint64 `json:"laml"`
	LASA      uint64 `json:"lasa"`
}

// ccTypeTDX is the CCEL CC type of an Intel TDX guest.
const ccTypeTDX = 2

// ParseCCEL parses the CCEL table: the ACPI header (36 bytes), CC type,
// subtype, reserved u16, log area minimum length and start address.
func ParseCCEL(b []byte) (CCELTable, error) {
	const size = 56
	if len(b) < size {
		return CCELTable{}, logErr(0, "CCEL table", "%d bytes, expected %d", len(b), size)
	}
	if string(b[:4]) != "CCEL" {
		return CCELTable{}, logErr(0, "CCEL signature", "%q, expected \"CCEL\"", b[:4])
	}
	if l := binary.LittleEndian.Uint32(b[4:]); l != size || len(b) != size {
		return CCELTable{}, logErr(4, "CCEL length", "header says %d, file has %d bytes, expected %d", l, len(b), size)
	}
	var sum byte
	for _, c := range b {
		sum += c
	}
	if sum != 0 {
		return CCELTable{}, logErr(9, "CCEL checksum", "bytes sum to %#x, expected 0", sum)
	}
	t := CCELTable{CCType: b[36], CCSubType: b[37], LAML: binary.LittleEndian.Uint64(b[40:]), LASA: binary.LittleEndian.Uint64(b[48:])}
	if t.CCType != ccTypeTDX {
		return t, logErr(36, "CC type", "%d, expected %d (TDX)", t.CCType, ccTypeTDX)
	}
	return t, nil
}

// Describe says what the event measured, from its type and data.
func (e LogEvent) Describe() string {
	name := EventTypeName(e.Type)
	d := e.Data
	switch e.Type {
	case evEFIBase + 0x01, evEFIBase + 0x02, evEFIBase + 0x0c, evEFIBase + 0xe0:
		// UEFI_VARIABLE_DATA: GUID, name length (chars) u64, data length u64, name.
		if len(d) >= 32 {
			n := binary.LittleEndian.Uint64(d[16:])
			if n <= uint64(len(d)-32)/2 {
				return name + " " + utf16String(d[32:32+2*n])
			}
		}
	case evEFIBase + 0x0a, evEFIBase + 0x0b:
		// *_BLOB2 / HANDOFF_TABLES2 start with a length-prefixed description.
		if len(d) >= 1 && int(d[0]) < len(d) {
			return name + " " + printable(d[1:1+int(d[0])])
		}
	case evEventTag:
		// TCG_PCClientTaggedEvent: taggedEventID u32, dataSize u32, data.
		if len(d) >= 8 {
			if s := printable(d[8:]); s != "" {
				return name + " " + s
			}
			return fmt.Sprintf("%s id %#x", name, binary.LittleEndian.Uint32(d))
		}
	case evEFIBase + 0x03:
		return name + " (EFI image: the kernel or a boot loader)"
	}
	if s := printable(d); s != "" {
		return name + " " + s
	}
	if s := utf16String(d); s != "" && isText(s) {
		return name + " " + shorten(s)
	}
	return name
}

func utf16String(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		u = append(u, binary.LittleEndian.Uint16(b[i:]))
	}
	return strings.TrimRight(string(utf16.Decode(u)), "\x00")
}

func isText(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// printable is b as text when it is ASCII text (a trailing NUL allowed).
func printable(b []byte) string {
	s := strings.TrimRight(string(b), "\x00")
	if !isText(s) {
		return ""
	}
	return shorten(s)
}

func shorten(s string) string {
	if len(s) > 96 {
		return fmt.Sprintf("%q...", s[:96])
	}
	return fmt.Sprintf("%q", s)
}
