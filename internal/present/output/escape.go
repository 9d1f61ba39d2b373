package output

import (
	"errors"
	"io"
	"unicode/utf8"
)

// Host-provided strings (the kernel command line, os-release, DMI, file
// contents, plug-in messages) can hold anything, terminal escape sequences
// included: ESC[2J clears the screen, OSC sequences set the window title
// or hide a hyperlink, BEL rings, CR overwrites what was printed. In the
// human (table) output berth shows them escaped, visibly:
//
//	C0 controls and DEL     \x1b, \x07, \x7f, ... (\t, \n, \r for those)
//	C1 controls             \u009b, ...
//	bidi and line controls  \u202e, \u2028, ... (they reorder or break lines)
//	invalid UTF-8           \xff, one per byte
//
// JSON and YAML carry the strings themselves (see Render).

// Escape returns s with every control character, bidi control and invalid
// UTF-8 byte escaped, layout characters (tab, newline) included: for one
// value in a table cell or a line.
func Escape(s string) string {
	if clean(s) {
		return s
	}
	return string(escapeTo(nil, []byte(s), false))
}

// EscapeText is Escape that keeps tabs and newlines: for a block of text
// such as an error message.
func EscapeText(s string) string {
	if clean(s) {
		return s
	}
	return string(escapeTo(nil, []byte(s), true))
}

// clean reports whether s needs no escaping (the common case: printable
// ASCII).
func clean(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= 0x7f {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// unsafeRune reports the valid non-ASCII runes that are escaped: C1
// controls, the bidi controls (which reorder what follows them on the
// line), and the Unicode line and paragraph separators.
func unsafeRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

func appendHexByte(dst []byte, b byte) []byte {
	return append(dst, '\\', 'x', hexDigits[b>>4], hexDigits[b&15])
}

func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&15], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15])
}

// escapeOne appends the escape of the control byte b (< 0x20 or 0x7f).
func escapeOne(dst []byte, b byte) []byte {
	switch b {
	case '\t':
		return append(dst, `\t`...)
	case '\n':
		return append(dst, `\n`...)
	case '\r':
		return append(dst, `\r`...)
	}
	return appendHexByte(dst, b)
}

// escapeTo appends src to dst escaped; keepLayout passes tabs and newlines
// through.
func escapeTo(dst, src []byte, keepLayout bool) []byte {
	for i := 0; i < len(src); {
		b := src[i]
		switch {
		case keepLayout && (b == '\n' || b == '\t'):
			dst = append(dst, b)
			i++
		case b < 0x20 || b == 0x7f:
			dst = escapeOne(dst, b)
			i++
		case b < 0x80:
			dst = append(dst, b)
			i++
		default:
			r, size := utf8.DecodeRune(src[i:])
			switch {
			case r == utf8.RuneError && size <= 1:
				dst = appendHexByte(dst, b)
				i++
				continue
			case unsafeRune(r):
				dst = appendU(dst, r)
			default:
				dst = append(dst, src[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

// EscapeWriter escapes what is written to it, as EscapeText does, on its
// way to the underlying writer: what a table writer prints, host strings
// included, cannot reach a terminal as control sequences. With sgr, the
// colour and style sequences a table paints with itself (ESC [ digits ; m,
// "select graphic rendition") pass through; the table must then escape the
// host strings it prints itself (Escape), since the writer cannot tell
// them apart. The first write error sticks: every later Write returns it.
type EscapeWriter struct {
	w       io.Writer
	sgr     bool
	pending []byte // an incomplete UTF-8 sequence or SGR at the end of the last Write
	err     error
}

// NewEscapeWriter returns an EscapeWriter on w; Flush must be called at the
// end.
func NewEscapeWriter(w io.Writer, sgr bool) *EscapeWriter {
	return &EscapeWriter{w: w, sgr: sgr}
}

// maxSGR bounds a style sequence; anything longer is escaped.
const maxSGR = 16

// Write escapes p and writes it. A UTF-8 sequence or style sequence cut at
// the end of p is kept for the next Write (or Flush).
func (e *EscapeWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if len(e.pending) == 0 && plainLayout(p) {
		if err := e.write(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	src := p
	if len(e.pending) > 0 {
		src = append(e.pending, p...)
		e.pending = nil
	}
	out := make([]byte, 0, len(src)+len(src)/8)
	i := 0
	for i < len(src) {
		start := i
		// Copy the plain run at once.
		for i < len(src) && src[i] >= 0x20 && src[i] < 0x7f {
			i++
		}
		out = append(out, src[start:i]...)
		if i == len(src) {
			break
		}
		b := src[i]
		switch {
		case b == '\n' || b == '\t':
			out = append(out, b)
			i++
		case b == 0x1b && e.sgr:
			n, complete := sgrLen(src[i:])
			switch {
			case n > 0:
				out = append(out, src[i:i+n]...)
				i += n
			case !complete:
				e.pending = append(e.pending, src[i:]...)
				i = len(src)
			default:
				out = escapeOne(out, b)
				i++
			}
		case b < 0x20 || b == 0x7f:
			out = escapeOne(out, b)
			i++
		default:
			if !utf8.FullRune(src[i:]) {
				e.pending = append(e.pending, src[i:]...)
				i = len(src)
				break
			}
			r, size := utf8.DecodeRune(src[i:])
			switch {
			case r == utf8.RuneError && size <= 1:
				out = appendHexByte(out, b)
				i++
				continue
			case unsafeRune(r):
				out = appendU(out, r)
			default:
				out = append(out, src[i:i+size]...)
			}
			i += size
		}
	}
	if err := e.write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// plainLayout reports whether p is printable ASCII, newlines and tabs:
// what a table mostly is, written as it is.
func plainLayout(p []byte) bool {
	for _, b := range p {
		if (b < 0x20 && b != '\n' && b != '\t') || b >= 0x7f {
			return false
		}
	}
	return true
}

// sgrLen returns the length of the style sequence ESC [ [0-9;]* m at the
// start of b, 0 when there is none; complete is false when b ends before
// it could be told.
func sgrLen(b []byte) (n int, complete bool) {
	if len(b) < 2 {
		return 0, false
	}
	if b[1] != '[' {
		return 0, true
	}
	for j := 2; j < len(b) && j <= maxSGR; j++ {
		switch c := b[j]; {
		case c == 'm':
			return j + 1, true
		case c == ';' || c >= '0' && c <= '9':
		default:
			return 0, true
		}
	}
	return 0, len(b) > maxSGR
}

func (e *EscapeWriter) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if _, err := e.w.Write(b); err != nil {
		e.err = err
		return err
	}
	return nil
}

// Flush writes what an incomplete sequence at the end left pending,
// escaped byte by byte, and returns the first write error, if any.
func (e *EscapeWriter) Flush() error {
	if e.err != nil {
		return e.err
	}
	var out []byte
	for _, b := range e.pending {
		out = appendHexByte(out, b)
	}
	e.pending = nil
	return e.write(out)
}

// Err is the first write error.
func (e *EscapeWriter) Err() error { return e.err }

// errNoTable is the error of a command without a table output.
var errNoTable = errors.New("this command has no table output: use -o json or -o yaml")

// escapeJSONish rewrites the runes a YAML parser rejects, and terminals
// may act on, inside JSON text as \u escapes: DEL, the C1 controls,
// U+FFFE and U+FFFF. encoding/json writes them raw (and escapes C0
// controls itself); JSON strings are the only place they can occur, and a
// raw one is never part of an escape sequence, so the result is the same
// JSON value.
func escapeJSONish(j []byte) []byte {
	i := 0
	for ; i < len(j); i++ {
		if j[i] >= 0x7f {
			break
		}
	}
	if i == len(j) {
		return j
	}
	// Runs of bytes that stay are copied whole: a report with a few
	// non-ASCII names must not cost a byte-at-a-time copy of 0.7 MB.
	out := make([]byte, 0, len(j)+16)
	run := 0 // start of the bytes not yet copied
	for i < len(j) {
		if j[i] < 0x7f {
			i++
			continue
		}
		r, size := utf8.DecodeRune(j[i:])
		if r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0xfffe || r == 0xffff {
			out = append(out, j[run:i]...)
			out = appendU(out, r)
			run = i + size
		}
		i += size
	}
	return append(out, j[run:]...)
}
