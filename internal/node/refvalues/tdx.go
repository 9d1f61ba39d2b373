package refvalues

import (
	"crypto/sha512"
	"encoding/binary"
	"fmt"
	"strings"
)

// PageOrder is the order in which the VMM issues TDH.MEM.PAGE.ADD and
// TDH.MR.EXTEND. MRTD hashes the operations in sequence, so the same
// firmware yields a different MRTD under each order.
type PageOrder int

// The page orders found in practice.
const (
	// SinglePass adds a page and immediately extends its chunks
	// (KVM_TDX_INIT_MEM_REGION with the measure flag, upstream KVM with
	// QEMU >= 9). The default.
	SinglePass PageOrder = iota
	// TwoPass adds every page of a section, then extends them all (the
	// QEMU 8.x TDX stacks).
	TwoPass
)

// String returns the option value: "single-pass" or "two-pass".
func (o PageOrder) String() string {
	if o == TwoPass {
		return "two-pass"
	}
	return "single-pass"
}

// MarshalText encodes the order as its option value.
func (o PageOrder) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// ParsePageOrder parses "single-pass" or "two-pass".
func ParsePageOrder(s string) (PageOrder, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "single-pass", "single", "":
		return SinglePass, nil
	case "two-pass", "two":
		return TwoPass, nil
	}
	return 0, fmt.Errorf("unknown page order %q: expected single-pass or two-pass", s)
}

// mrChunk is how many bytes one TDH.MR.EXTEND measures.
const mrChunk = 256

// mrtd accumulates MRTD: SHA-384 over 128-byte records, one per
// TDH.MEM.PAGE.ADD, and one per TDH.MR.EXTEND followed by the 256 bytes it
// extends (TDX module ABI, "MRTD").
type mrtd struct {
	h   interface{ Write([]byte) (int, error) }
	rec [128]byte
}

func (m *mrtd) record(op string, gpa uint64) {
	clear(m.rec[:])
	copy(m.rec[:], op)
	binary.LittleEndian.PutUint64(m.rec[16:], gpa)
	m.h.Write(m.rec[:])
}

func (m *mrtd) pageAdd(gpa uint64) { m.record("MEM.PAGE.ADD", gpa) }

func (m *mrtd) extendPage(gpa uint64, page []byte) {
	for off := 0; off < pageSize; off += mrChunk {
		m.record("MR.EXTEND", gpa+uint64(off))
		m.h.Write(page[off : off+mrChunk])
	}
}

// MRTD computes the TD build-time measurement of a TDVF image: every section
// not marked PAGE.AUG is added page by page, and sections marked MR.EXTEND
// have their content extended in 256-byte chunks, in the given order.
func MRTD(t *TDVF, order PageOrder) Digest384 {
	h := sha512.New384()
	m := &mrtd{h: h}
	zero := make([]byte, pageSize)
	page := make([]byte, pageSize)
	// content returns page i of the section: raw data from the image,
	// zero-filled beyond the raw size.
	content := func(s TDVFSection, i uint64) []byte {
		off := i * pageSize
		if off >= uint64(s.RawSize) {
			return zero
		}
		n := copy(page, t.Image[uint64(s.DataOffset)+off:uint64(s.DataOffset)+min(off+pageSize, uint64(s.RawSize))])
		clear(page[n:])
		return page
	}
	for _, s := range t.Sections {
		if s.Attributes&TDVFAttrPageAug != 0 {
			continue
		}
		extend := s.Attributes&TDVFAttrMRExtend != 0
		pages := s.MemSize / pageSize
		switch order {
		case TwoPass:
			for i := range pages {
				m.pageAdd(s.GPA + i*pageSize)
			}
			if extend {
				for i := range pages {
					m.extendPage(s.GPA+i*pageSize, content(s, i))
				}
			}
		default:
			for i := range pages {
				m.pageAdd(s.GPA + i*pageSize)
				if extend {
					m.extendPage(s.GPA+i*pageSize, content(s, i))
				}
			}
		}
	}
	var d Digest384
	h.Sum(d[:0])
	return d
}
