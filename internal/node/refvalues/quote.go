package refvalues

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// TDXQuote holds the TD report fields of a TDX quote that reference values
// concern. The layout is Intel's DCAP quote format (Intel TDX DCAP Quoting
// Library API, "Quote Format"): a 48-byte header (version u16, attestation
// key type u16, TEE type u32 = 0x81 for TDX, reserved, QE vendor ID[16],
// user data[20]); in version 4 the TD report body (584 bytes) follows at
// offset 48; in version 5 a body descriptor (type u16: 2 TD report 1.0,
// 3 TD report 1.5; size u32) precedes it at 48. The body is TEE_TCB_SVN[16],
// MRSEAM, MRSIGNERSEAM, SEAMATTRIBUTES[8], TDATTRIBUTES[8], XFAM[8], MRTD,
// MRCONFIGID, MROWNER, MROWNERCONFIG, RTMR0-3 (48 bytes each unless
// noted), REPORTDATA[64]. The signature is not checked: a verifier does
// that; berth reads the registers to check a log against them.
type TDXQuote struct {
	Version    uint16       `json:"version"`
	MRTD       Digest384    `json:"mrtd"`
	MRConfigID Digest384    `json:"mrConfigId"`
	RTMR       [4]Digest384 `json:"rtmr"`
}

// quoteErr is a malformed quote: the offset and field at fault.
func quoteErr(off int, field, format string, a ...any) error {
	return &EventLogError{Input: "TDX quote", Offset: off, Field: field, Msg: fmt.Sprintf(format, a...)}
}

// ParseTDXQuote reads the header and TD report body of a v4 or v5 quote.
func ParseTDXQuote(b []byte) (*TDXQuote, error) {
	const header, body10 = 48, 584
	if len(b) < header {
		return nil, quoteErr(0, "header", "%d bytes, a quote header has %d", len(b), header)
	}
	q := &TDXQuote{Version: binary.LittleEndian.Uint16(b)}
	if tee := binary.LittleEndian.Uint32(b[4:]); tee != 0x81 {
		return nil, quoteErr(4, "tee_type", "%#x, expected 0x81 (TDX)", tee)
	}
	off := header
	switch q.Version {
	case 4:
	case 5:
		if len(b) < header+6 {
			return nil, quoteErr(header, "body descriptor", "%d bytes left, expected 6", len(b)-header)
		}
		typ, size := binary.LittleEndian.Uint16(b[header:]), binary.LittleEndian.Uint32(b[header+2:])
		if typ != 2 && typ != 3 {
			return nil, quoteErr(header, "body type", "%d, expected 2 (TD report 1.0) or 3 (TD report 1.5)", typ)
		}
		if size < body10 {
			return nil, quoteErr(header+2, "body size", "%d, a TD report has at least %d bytes", size, body10)
		}
		off += 6
	default:
		return nil, quoteErr(0, "version", "%d, expected 4 or 5", q.Version)
	}
	if len(b)-off < body10 {
		return nil, quoteErr(off, "TD report body", "%d bytes left, expected %d", len(b)-off, body10)
	}
	body := b[off:]
	copy(q.MRTD[:], body[136:])
	copy(q.MRConfigID[:], body[184:])
	for i := range q.RTMR {
		copy(q.RTMR[i][:], body[328+48*i:])
	}
	return q, nil
}

// CheckQuote compares the log's replay with the quote's RTMR0-2: a log
// that does not replay to the quote is not this TD's log (or was changed),
// and comparing it with reference values would explain nothing.
func (x *Explanation) CheckQuote(q *TDXQuote) {
	x.Quote = q
	for i := range x.Registers {
		v := q.RTMR[i]
		x.Registers[i].Quote = &v
		x.Registers[i].QuoteMatch = x.Registers[i].Log == v
	}
}

// QuoteMismatch reports whether a quote was given and the log does not
// replay to one of its registers.
func (x *Explanation) QuoteMismatch() bool {
	for _, r := range x.Registers {
		if r.Quote != nil && !r.QuoteMatch {
			return true
		}
	}
	return false
}

// dstackEvent is one event of dstack's JSON event log (dstack
// cc-eventlog TdxEventLog): imr is the RTMR index (0-3), digest and
// event_payload hex.
type dstackEvent struct {
	IMR          *uint32 `json:"imr"`
	EventType    uint32  `json:"event_type"`
	Digest       string  `json:"digest"`
	Event        string  `json:"event"`
	EventPayload string  `json:"event_payload"`
}

// ParseDstackEventLog reads dstack's JSON event log (what its guest agent
// returns with a quote): the firmware's CCEL events decoded, and dstack's
// own RTMR3 events. Events keep their position (Seq) and get the CC MR
// index (imr + 1) so that they replay like a CCEL log.
func ParseDstackEventLog(b []byte) (*EventLog, error) {
	var evs []dstackEvent
	if err := json.Unmarshal(b, &evs); err != nil {
		return nil, fmt.Errorf("dstack event log: %w", err)
	}
	log := &EventLog{Algorithms: []LogAlgorithm{{ID: algSHA384, Size: 48}}, Size: len(b)}
	for i, e := range evs {
		if e.IMR == nil || *e.IMR > 3 {
			return nil, fmt.Errorf("dstack event log: event %d: imr missing or not 0-3", i)
		}
		ev := LogEvent{Seq: i + 1, Offset: -1, MRIndex: *e.IMR + 1, Type: e.EventType}
		d, err := hex.DecodeString(e.Digest)
		if err != nil || len(d) != 48 {
			return nil, fmt.Errorf("dstack event log: event %d: digest %q is not 48 bytes of hex", i, e.Digest)
		}
		copy(ev.SHA384[:], d)
		if ev.Data, err = hex.DecodeString(e.EventPayload); err != nil {
			return nil, fmt.Errorf("dstack event log: event %d: event_payload: %w", i, err)
		}
		if e.Event != "" && !isText(string(ev.Data)) {
			// dstack's runtime events name themselves in event.
			ev.Data = []byte(e.Event)
		}
		log.Events = append(log.Events, ev)
	}
	return log, nil
}
