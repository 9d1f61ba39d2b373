// Package pciids resolves PCI vendor and device names from the pci.ids
// database (the Debian/hwdata package, usr/share/misc/pci.ids).
//
// The database is 1.3 MB; berth needs the names of the few dozen devices
// of one host. Resolve therefore streams the file once and keeps only the
// names asked for, instead of building an in-memory copy of the whole
// database as general-purpose libraries do.
//
// Nearly every line of that stream changes nothing: the devices and
// subsystems of vendors not asked for, the subsystems and other devices
// of those asked for (Intel's block alone is 8,500 lines, at 70% of the
// file). Finding each of their ends in turn was most of the cost (issue
// #17). Resolve's scan finds the starts of the lines that can matter, a
// newline not followed by a tab (in a wanted vendor's block, not by two),
// 64 bytes a step with AVX2 (scan_amd64.s; line by line elsewhere), and
// passes those whose first bytes show they change nothing: comments, and
// well-formed vendor or device lines whose id misses a Bloom filter of the
// wanted ones. Resolve reads and judges the few others as before. The
// scan does not look for the wanted vendors' lines themselves: that would
// trust the file's order or cost a pass per vendor, and miss upper-case
// ids; looking at every vendor line gives the old answers for any input.
//
// Errors are still those of a line-by-line reading, with its line numbers,
// for the lines Resolve looks at: vendor, comment and class lines up to
// the end of the last wanted vendor's block, and the device lines of
// wanted vendors. One kind is gone: a line of 64 KiB or more among those
// passed over (other vendors' devices and subsystems, the wanted vendors'
// subsystems) was an error because the line reader could not hold it; it
// is now passed over like the others.
package pciids

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// ID is one vendor/device pair, both as four lower-case hex digits
// ("10de", "2330").
type ID struct {
	Vendor string
	Device string
}

// Names are the names found for a set of IDs.
type Names struct {
	// Vendors maps a vendor id to its name.
	Vendors map[string]string
	// Devices maps a vendor/device pair to the device name.
	Devices map[ID]string
}

// Vendor returns the name of vendor, or "".
func (n Names) Vendor(vendor string) string { return n.Vendors[vendor] }

// Device returns the name of the device, or "".
func (n Names) Device(id ID) string { return n.Devices[id] }

// maxLine bounds a line Resolve looks at; real lines are under 200
// bytes. It is the size of the read buffer too, which such a line must
// fit in whole, as it had to in the line reader before.
const maxLine = 64 * 1024

// Resolve reads a pci.ids database from r and returns the names of the
// vendors and devices in want. IDs not in the database are simply absent
// from the result. It stops reading once every wanted vendor's block has
// been passed. A malformed vendor line, or device line of a wanted
// vendor, is an error naming the line; other lines (subsystems, classes,
// comments, other vendors' devices) are skipped without inspection. It
// reads in 64 KiB pieces into a buffer of its own.
func Resolve(r io.Reader, want []ID) (Names, error) {
	return resolve(r, want, hasAVX2())
}

// resolve is Resolve with the vector scan on or off, so that tests hold
// both to the same answers on any machine.
func resolve(r io.Reader, want []ID, vector bool) (Names, error) {
	n := Names{Vendors: map[string]string{}, Devices: map[ID]string{}}
	w := newWanted(want)
	if len(w.vendors) == 0 {
		return n, nil
	}
	s := scanner{r: r, buf: make([]byte, maxLine), end: 1, open: -1, hold: -1, vector: vector}
	// A newline before the text makes its first line start like the
	// others, and numbers line k after the k-th newline.
	s.buf[0] = '\n'
	var (
		cur  *wantedVendor // the vendor whose block this is, if wanted
		seen int           // wanted vendors whose block has started
	)
scan:
	for s.scan(cur, &w.filter) {
		// The few lines the scan could not pass, read whole and judged
		// as a line-by-line reading does.
		base, baseLines := s.base, s.baseLines
		for _, e := range s.batch[:s.count] {
			p := base + int(e.pos) + 1
			lineNo := baseLines + int(e.lines) + 1
			s.last, s.lastLine = p, lineNo
			line, q, ok := s.whole(p, lineNo)
			if !ok {
				break scan
			}
			base += q - p // reading on moves the text
			line = trimCR(line)
			switch {
			case len(line) == 0 || line[0] == '#':
			case line[0] == '\t':
				if cur == nil || (len(line) > 1 && line[1] == '\t') {
					continue // not found by the scan, but judged as before
				}
				id, err := entryID(line[1:])
				if err != nil {
					return n, fmt.Errorf("pci.ids:%d: device line: %w", lineNo, err)
				}
				if key, ok := w.device(cur, id); ok {
					n.Devices[key] = entryName(line[1:])
				}
			case line[0] == 'C' && len(line) > 1 && line[1] == ' ':
				// The class section follows all vendors.
				return n, nil
			default:
				if seen == len(w.vendors) {
					return n, nil // the last wanted vendor's block has ended
				}
				id, err := entryID(line)
				if err != nil {
					return n, fmt.Errorf("pci.ids:%d: vendor line: %w", lineNo, err)
				}
				cur = w.vendor(id)
				if cur != nil {
					seen += cur.start()
					n.Vendors[cur.key] = entryName(line)
				}
				if cur != s.cur {
					// The batch was found for another vendor's block:
					// the scan starts again after this line.
					s.open = -1
					continue scan
				}
			}
		}
	}
	if s.err != nil {
		line := s.errLine
		if line == 0 {
			// A read failed: the line being read is the one after the
			// last newline that arrived.
			line = s.lines + bytes.Count(s.buf[s.pos:s.end], []byte{'\n'})
		}
		return n, fmt.Errorf("pci.ids:%d: %w", line, s.err)
	}
	return n, nil
}

// wanted holds the ids asked for as the little-endian words of their four
// lower-cased bytes, which hex4 gives for the file's ids.
type wanted struct {
	// filter holds every wanted vendor: it rejects almost all of the
	// 2,000 vendor lines before Intel's alone.
	filter  idSet
	vendors []wantedVendor
	// devices are all vendors' wanted devices, in one allocation: only an
	// id that passes its vendor's filter is looked for in them.
	devices []wantedDevice
}

type wantedVendor struct {
	id     uint32
	key    string
	filter idSet // the wanted devices
	seen   bool
}

type wantedDevice struct {
	vendor, id uint32
	key        ID
}

func newWanted(want []ID) wanted {
	// A big host asks for thousands of functions of a few dozen models:
	// the lists grow as distinct ids come, not to len(want).
	n := min(len(want), 64)
	w := wanted{vendors: make([]wantedVendor, 0, n), devices: make([]wantedDevice, 0, n)}
	for _, id := range want {
		id = ID{strings.ToLower(id.Vendor), strings.ToLower(id.Device)}
		if len(id.Vendor) != 4 || len(id.Device) != 4 {
			continue // cannot be in the database
		}
		vid, did := word(id.Vendor), word(id.Device)
		v := w.vendor(vid)
		if v == nil {
			w.vendors = append(w.vendors, wantedVendor{id: vid, key: id.Vendor})
			w.filter.add(vid)
			v = &w.vendors[len(w.vendors)-1]
		}
		if _, ok := w.device(v, did); !ok {
			w.devices = append(w.devices, wantedDevice{vid, did, id})
			v.filter.add(did)
		}
	}
	return w
}

// vendor returns the wanted vendor id, or nil.
func (w *wanted) vendor(id uint32) *wantedVendor {
	if !w.filter.has(id) {
		return nil
	}
	for i := range w.vendors {
		if w.vendors[i].id == id {
			return &w.vendors[i]
		}
	}
	return nil
}

// start records that the vendor's block has started and returns 1 the
// first time.
func (v *wantedVendor) start() int {
	if v.seen {
		return 0
	}
	v.seen = true
	return 1
}

// device returns the key of v's wanted device id, or ok false.
func (w *wanted) device(v *wantedVendor, id uint32) (key ID, ok bool) {
	if !v.filter.has(id) {
		return ID{}, false
	}
	for _, d := range w.devices {
		if d.vendor == v.id && d.id == id {
			return d.key, true
		}
	}
	return ID{}, false
}

// idSet is a one-hash Bloom filter of ids: a bit of 256 for each, taken
// from the top of a multiple (Fibonacci hashing). With a dozen ids in it,
// one id in twenty not in it passes for one that is.
type idSet [4]uint64

func idHash(id uint32) uint32 { return id * 0x9e3779b1 >> 24 }

func (f *idSet) add(id uint32) { h := idHash(id); f[h/64] |= 1 << (h % 64) }

func (f *idSet) has(id uint32) bool { h := idHash(id); return f[h/64]&(1<<(h%64)) != 0 }

// word packs four bytes of s like binary.LittleEndian.Uint32.
func word(s string) uint32 {
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// hex4 reads the first four bytes of b (it needs four) as one word and
// reports whether they are all hex digits; A-F come back lower-cased.
// Each byte is range-checked in its own lane of the word: adding 0x80-lo
// to a byte under 0x80 sets its top bit exactly when it is at least lo.
func hex4(b []byte) (uint32, bool) {
	const top = 0x80808080
	x := binary.LittleEndian.Uint32(b)
	digit := (x + 0x50505050) &^ (x + 0x46464646) & top // '0' <= c <= '9'
	l := x | 0x20202020
	letter := (l + 0x1f1f1f1f) &^ (l + 0x19191919) & top // 'a' <= c|0x20 <= 'f'
	return x | letter>>2, x&top == 0 && digit|letter == top
}

// trimCR drops a final "\r": a byte compared, where bytes.TrimSuffix's
// call per line was a tenth of a scan's time.
func trimCR(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		return line[:n-1]
	}
	return line
}

// entryID returns the lower-cased id that starts a vendor or device line
// ("10de  NVIDIA Corporation") as hex4 does.
func entryID(s []byte) (uint32, error) {
	if len(s) >= 4 {
		if id, ok := hex4(s); ok {
			return id, nil
		}
	}
	return 0, fmt.Errorf("expected 4 hex digits, got %q", truncate(s))
}

// entryName returns the name after the id of a line entryID accepted.
func entryName(s []byte) string { return strings.TrimSpace(string(s[4:])) }

func truncate(s []byte) string {
	if len(s) > 40 {
		return string(s[:40]) + "..."
	}
	return string(s)
}

// scanner holds the text in a buffer of its own and finds, a batch at a
// time, the lines that Resolve must judge itself.
type scanner struct {
	r      io.Reader
	buf    []byte
	end    int  // buf[:end] holds text
	pos    int  // the next byte to look at for a newline
	lines  int  // newlines before pos, counting the one put before the text
	vector bool // scan with scanAVX2
	eof    bool
	err    error // a read error, or bufio.ErrTooLong
	// errLine is the line bufio.ErrTooLong names; 0 for a read error,
	// whose line is known once the text before it is scanned.
	errLine int

	// batch[:count] are the newlines before the lines the last scan left
	// to Resolve, counted from base, where baseLines newlines had passed.
	// The scan was for cur's block (nil: outside any wanted block).
	batch           [batchCap]entry
	count           int
	base, baseLines int
	cur             *wantedVendor
	// last is the line Resolve took last: a scan for another block
	// starts again from it.
	last, lastLine int
	// open is the start of the last line passed whose end is still to
	// come, or -1: the line must fit in the buffer when it does. No
	// newline follows it, so its number is lines.
	open           int
	hold, holdLine int // the line whole is reading, or -1
}

// batchCap bounds the lines one scan leaves: a step of scanAVX2 may add
// 64 to its last half.
const batchCap = 128

// entry is a newline the scan found, at buf[base+pos], after lines
// others since base.
type entry struct{ pos, lines uint32 }

// scan looks from pos on at the lines that start blocks or may matter in
// one: outside a wanted vendor's block (cur nil), the lines not starting
// with a tab; inside, those not starting with two. It passes those that
// change nothing: comments, empty lines, well-formed vendor lines outside
// a block whose vendor misses vendors (wanted.filter), and well-formed
// device lines inside one whose device misses cur.filter. The others go
// into the batch, which ends after a line that may end the block or start
// one. It reads more text when needed, and reports false at the end of
// the text and when reading fails (s.err). A scan for a block other than
// the last one's starts again from the line Resolve took last.
func (s *scanner) scan(cur *wantedVendor, vendors *idSet) bool {
	if cur != s.cur {
		s.pos, s.lines, s.cur = s.last, s.lastLine, cur
	}
	dev, filter := cur != nil, vendors
	if dev {
		filter = &cur.filter
	}
	for {
		s.base, s.baseLines = s.pos, s.lines
		s.count = 0
		passed := -1
		if s.vector && s.end-s.pos >= vectorMin {
			n, lines, count, p := scanAVX2(s.buf[s.pos:s.end], dev, filter, &s.batch)
			s.pos += n
			s.lines += lines
			s.count = count
			passed = p
		}
		if s.count == 0 {
			// One line at a time: without AVX2, and for the last bytes.
			if p := s.scanLines(dev, filter); p >= 0 {
				passed = p
			}
		}
		if s.count > 0 || passed >= 0 {
			// Lines were found after the open line: it has ended. The
			// last line passed is open if no line was left after it.
			s.open = -1
			if s.count == 0 || passed > int(s.batch[s.count-1].pos) {
				s.open = s.base + passed + 1
			}
		}
		if s.count > 0 {
			return true
		}
		if !s.fill() {
			if s.err != nil || s.pos == s.end {
				return false
			}
			// The text ends after the newline at pos: in a block, it
			// may be followed by a tab, a device line without an id.
			s.base, s.baseLines = s.pos, s.lines
			if s.pos+1 < s.end {
				s.batch[0] = entry{}
				s.count = 1
			}
			s.lines++
			s.pos = s.end
			return s.count > 0
		}
	}
}

// scanLines is scanAVX2 one line at a time, from pos on: it adds to the
// batch and returns the index from base of the newline before the last
// line passed, or -1. It keeps the scanner's state in local variables:
// without AVX2 it runs once per line of the file.
func (s *scanner) scanLines(dev bool, filter *idSet) (passed int) {
	passed = -1
	b := s.buf[:s.end]
	pos, lines, count := s.pos, s.lines, s.count
	base, baseLines := s.base, s.baseLines
scan:
	for count < len(s.batch) {
		j, n := skipLines(b, pos, dev)
		lines += n
		if j < 0 {
			pos = len(b)
			break
		}
		// The newline at j is followed by a line to look at, or is too
		// near the end for skipLines to tell.
		if j+1 == len(b) {
			pos = j // what follows has yet to be read
			break
		}
		id := j + 1 // where the id starts, if the line has one
		switch c := b[j+1]; {
		case c == '\t' && !dev:
			lines++ // a line not looked at, at the end
			pos = j + 2
			continue
		case c == '\t':
			if j+2 == len(b) {
				pos = j
				break scan
			}
			id = j + 2 // a device line
		case c == '#' || c == '\n':
			passed = j - base // a comment or an empty line
			lines++
			pos = j + 1
			continue
		case dev:
			// The block may end here: stop after the line.
			s.batch[count] = entry{uint32(j - base), uint32(lines - baseLines)}
			count++
			lines++
			pos = j + 1
			break scan
		}
		if id+4 <= len(b) {
			if x, ok := hex4(b[id:]); ok && !filter.has(x) {
				passed = j - base
				lines++
				pos = j + 1
				continue
			}
		}
		s.batch[count] = entry{uint32(j - base), uint32(lines - baseLines)}
		count++
		lines++
		pos = j + 1
		if !dev {
			break // a vendor that may be wanted
		}
	}
	s.pos, s.lines, s.count = pos, lines, count
	return passed
}

// skipLines returns the index of the first newline in b from pos on that
// is not followed by a tab (with dev, by two tabs), or by fewer than two
// bytes, or -1; n is the number of newlines before it. It is the loop of
// scanLines most lines take, with little live across the call per line.
func skipLines(b []byte, pos int, dev bool) (j, n int) {
	for {
		i := bytes.IndexByte(b[pos:], '\n')
		if i < 0 {
			return -1, n
		}
		j = pos + i
		if j+2 >= len(b) || b[j+1] != '\t' || dev && b[j+2] != '\t' {
			return j, n
		}
		n++
		pos = j + 2
	}
}

// whole returns the line starting at buf[p], number lineNo, without its
// newline, reading on until its end, and where it starts now: reading
// moves the text in the buffer. ok is false when reading fails (s.err).
func (s *scanner) whole(p, lineNo int) (line []byte, start int, ok bool) {
	s.hold, s.holdLine = p, lineNo
	from := p
	for {
		if i := bytes.IndexByte(s.buf[from:s.end], '\n'); i >= 0 {
			p, s.hold = s.hold, -1
			return s.buf[p : from+i], p, true
		}
		searched := s.end - s.hold
		if !s.fill() {
			p, s.hold = s.hold, -1
			if s.err != nil {
				return nil, p, false
			}
			return s.buf[p:s.end], p, true // the last line, without newline
		}
		from = s.hold + searched
	}
}

// fill reads more text after end, first moving what is still needed to
// the front of the buffer: from pos, the line whole is reading or the
// open line. It is called when the batch is used up, or holds nothing
// after the line whole reads, so batch positions need no moving. It
// reports whether anything was added.
func (s *scanner) fill() bool {
	if s.eof || s.err != nil {
		return false
	}
	keep := s.pos
	if s.open >= 0 {
		if bytes.IndexByte(s.buf[s.open:s.end], '\n') >= 0 {
			s.open = -1 // it ended inside the buffer, so under maxLine
		} else {
			keep = min(keep, s.open)
		}
	}
	if s.hold >= 0 {
		keep = min(keep, s.hold)
	}
	if keep > 0 {
		s.end = copy(s.buf, s.buf[keep:s.end])
		s.pos -= keep
		s.last -= keep // still needed only if it is the line held
		if s.open >= 0 {
			s.open -= keep
		}
		if s.hold >= 0 {
			s.hold -= keep
		}
	}
	if s.end == len(s.buf) {
		// A line fills the buffer, as in the line reader before.
		s.err = bufio.ErrTooLong
		s.errLine = s.lines // the open line's: see open
		if s.hold == 0 {
			s.errLine = s.holdLine
		}
		return false
	}
	for range 100 {
		k, err := s.r.Read(s.buf[s.end:])
		s.end += k
		if err == io.EOF {
			s.eof = true
		} else if err != nil {
			s.err = err
		}
		if k > 0 || s.eof || s.err != nil {
			return k > 0
		}
	}
	s.err = io.ErrNoProgress
	return false
}
