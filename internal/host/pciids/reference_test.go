package pciids

// The implementation of Resolve before it skipped lines many at a time,
// unchanged but for its names: the fuzz targets and tests hold the new
// one to its answers.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// refMaxLine bounds one line of the database; real lines are under 200 bytes.
const refMaxLine = 64 * 1024

// refResolve is Resolve as it was before issue #17's scan, the
// reference the new one must agree with. It reads a pci.ids database
// from r and returns the names of the vendors and devices in want. IDs
// not in the database are simply absent from the result. It stops
// reading once every wanted vendor's block has been passed. A malformed
// vendor or device line is an error naming the line; lines of other
// kinds (subsystems, classes, comments) are skipped without inspection.
func refResolve(r io.Reader, want []ID) (Names, error) {
	n := Names{Vendors: map[string]string{}, Devices: map[ID]string{}}
	// wantDev is keyed by vendor and device digits side by side, so that
	// a lookup needs no allocation.
	wantDev := map[[8]byte]ID{}
	wantVen := map[string]bool{}
	for _, id := range want {
		id = ID{strings.ToLower(id.Vendor), strings.ToLower(id.Device)}
		if len(id.Vendor) != 4 || len(id.Device) != 4 {
			continue // cannot be in the database
		}
		var k [8]byte
		copy(k[:4], id.Vendor)
		copy(k[4:], id.Device)
		wantDev[k] = id
		wantVen[id.Vendor] = true
	}
	if len(wantVen) == 0 {
		return n, nil
	}
	lr := refLineReader{r: r, buf: make([]byte, 64<<10)}
	var (
		cur    string // current vendor when it is wanted, else ""
		key    [8]byte
		seen   int // wanted vendors whose block has started
		lineNo int
	)
	for {
		if cur == "" {
			// Device and subsystem lines of an unwanted vendor are most
			// of the file: skipped without looking at them.
			lineNo += lr.skipIndented()
		}
		line, ok := lr.next()
		if !ok {
			break
		}
		lineNo++
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		switch {
		case line[0] == '\t':
			if cur == "" || (len(line) > 1 && line[1] == '\t') {
				continue // device of an unwanted vendor, or a subsystem line
			}
			id, err := refEntryID(line[1:])
			if err != nil {
				return n, fmt.Errorf("pci.ids:%d: device line: %w", lineNo, err)
			}
			copy(key[4:], id[:])
			if k, ok := wantDev[key]; ok {
				n.Devices[k] = refEntryName(line[1:])
			}
		case line[0] == 'C' && len(line) > 1 && line[1] == ' ':
			// The class section follows all vendors.
			return n, nil
		default:
			if seen == len(wantVen) {
				return n, nil // the last wanted vendor's block has ended
			}
			id, err := refEntryID(line)
			if err != nil {
				return n, fmt.Errorf("pci.ids:%d: vendor line: %w", lineNo, err)
			}
			cur = ""
			// Indexing with string(bytes) does not allocate.
			if wantVen[string(id[:])] {
				cur = string(id[:])
				copy(key[:4], id[:])
				if _, dup := n.Vendors[cur]; !dup {
					seen++
				}
				n.Vendors[cur] = refEntryName(line)
			}
		}
	}
	if lr.err != nil {
		return n, fmt.Errorf("pci.ids:%d: %w", lineNo+1, lr.err)
	}
	return n, nil
}

// refLineReader splits a stream into lines in a buffer of its own, reading
// more only when no whole line is left: a bufio.Scanner's call per line
// was most of the time of a scan through the 37k lines.
type refLineReader struct {
	r        io.Reader
	buf      []byte
	start    int // unread bytes are buf[start:end]
	end      int
	eof      bool
	err      error // a read error, or bufio.ErrTooLong
	lastLine bool  // the text does not end in a newline: the rest is a line
}

// fill reads more after the unread bytes, moving them to the front; it
// reports whether anything was added.
func (l *refLineReader) fill() bool {
	if l.eof || l.err != nil {
		return false
	}
	if l.start > 0 {
		l.end = copy(l.buf, l.buf[l.start:l.end])
		l.start = 0
	}
	if l.end == len(l.buf) {
		l.err = bufio.ErrTooLong // a line longer than refMaxLine
		return false
	}
	for range 100 {
		k, err := l.r.Read(l.buf[l.end:])
		l.end += k
		if err == io.EOF {
			l.eof = true
		} else if err != nil {
			l.err = err
		}
		if k > 0 || l.eof || l.err != nil {
			return k > 0
		}
	}
	l.err = io.ErrNoProgress
	return false
}

// next returns the next line without its newline (and a trailing "\r"),
// valid until the following call; ok is false at the end of the text or
// on an error (in l.err).
func (l *refLineReader) next() (line []byte, ok bool) {
	for {
		rest := l.buf[l.start:l.end]
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			l.start += i + 1
			return refTrimCR(rest[:i]), true
		}
		if !l.fill() {
			if l.err == nil && l.end > l.start {
				// The last line, without a newline.
				line = refTrimCR(l.buf[l.start:l.end])
				l.start = l.end
				return line, true
			}
			return nil, false
		}
	}
}

// trimCR drops a final "\r": a byte compared, where bytes.TrimSuffix's
// call per line was a tenth of a scan's time.
func refTrimCR(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		return line[:n-1]
	}
	return line
}

// skipIndented passes the lines that start with a tab and returns how
// many it passed.
func (l *refLineReader) skipIndented() int {
	n := 0
	for {
		rest := l.buf[l.start:l.end]
		for len(rest) > 0 && rest[0] == '\t' {
			i := bytes.IndexByte(rest, '\n')
			if i < 0 {
				break
			}
			rest = rest[i+1:]
			n++
		}
		l.start = l.end - len(rest)
		if len(rest) > 0 && rest[0] != '\t' {
			return n
		}
		// An indented line continues past the buffer, or the buffer is
		// used up: read on.
		if !l.fill() {
			return n
		}
	}
}

// entryID returns the lower-cased id that starts a vendor or device line
// ("10de  NVIDIA Corporation"), without allocating.
func refEntryID(s []byte) ([4]byte, error) {
	var id [4]byte
	if len(s) < 4 || !refIsHex4(s[:4]) {
		return id, fmt.Errorf("expected 4 hex digits, got %q", refTruncate(s))
	}
	for i := range 4 {
		c := s[i]
		if 'A' <= c && c <= 'F' {
			c += 'a' - 'A'
		}
		id[i] = c
	}
	return id, nil
}

// entryName returns the name after the id of a line entryID accepted.
func refEntryName(s []byte) string { return strings.TrimSpace(string(s[4:])) }

func refIsHex4(s []byte) bool {
	for i := 0; i < 4; i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

func refTruncate(s []byte) string {
	if len(s) > 40 {
		return string(s[:40]) + "..."
	}
	return string(s)
}
