package output

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// JSONAppender is implemented by a value that writes its own JSON through
// a JSONWriter: the bytes Render writes for any other value (json.Marshal,
// indented by two spaces, with berth's extra escapes), in one pass instead
// of reflection, indentation and escaping each over the whole text. Each
// implementation must be held by its tests to EncodeJSON of the value
// encoding/json would encode; an error makes Render fall back to that.
type JSONAppender interface {
	AppendJSON(w *JSONWriter) error
}

// JSONWriter writes JSON as Render prints it: two-space indentation, keys
// in the order written, strings escaped as json.Marshal escapes them (HTML
// characters, U+2028 and U+2029, invalid UTF-8 as U+FFFD) and as
// escapeJSONish adds (DEL, C1 controls, U+FFFE, U+FFFF). The caller
// writes a well-formed sequence (a key before each object member); the
// writer does not check it.
type JSONWriter struct {
	buf []byte
	// sink, when set, takes the text in chunks of about chunk bytes as it
	// is written (Render's), so that a large document is never held
	// whole: for `berth check --all` that is 0.7 MB, as much as the rest
	// of what the command adds to the default set's allocations.
	sink    io.Writer
	sinkErr error
	// flushed is set once a chunk went to sink.
	flushed bool
	depth   int
	// open is set right after an opening bracket: the next member needs
	// no comma, and the container may stay empty ("{}", "[]").
	open bool
	// keyed is set after a key: the value follows on the same line.
	keyed bool
}

// chunk is how much a JSONWriter with a sink holds before passing it on.
const chunk = 32 << 10

// Grow makes room for n more bytes, so that a writer that can estimate
// its size copies the text once.
func (w *JSONWriter) Grow(n int) {
	if w.sink != nil {
		n = min(n, 2*chunk)
	}
	if cap(w.buf)-len(w.buf) < n {
		b := make([]byte, len(w.buf), len(w.buf)+n)
		copy(b, w.buf)
		w.buf = b
	}
}

// Bytes returns what was written (without a sink: all of it).
func (w *JSONWriter) Bytes() []byte { return w.buf }

// flush passes what was written on to the sink.
func (w *JSONWriter) flush() {
	if len(w.buf) == 0 {
		return
	}
	if w.sinkErr == nil {
		_, w.sinkErr = w.sink.Write(w.buf)
	}
	w.flushed = true
	w.buf = w.buf[:0]
}

// next starts a member of the enclosing container on its own line.
func (w *JSONWriter) next() {
	if w.sink != nil && len(w.buf) >= chunk {
		w.flush()
	}
	if !w.open {
		w.buf = append(w.buf, ',')
	}
	w.open = false
	w.newline()
}

// newlineSpaces is a newline and the indentation of the levels a report
// has, appended at once.
const newlineSpaces = "\n                                "

// newline starts a line indented to the current depth.
func (w *JSONWriter) newline() {
	if n := 1 + 2*w.depth; n <= len(newlineSpaces) {
		w.buf = append(w.buf, newlineSpaces[:n]...)
		return
	}
	w.buf = append(w.buf, '\n')
	for range w.depth {
		w.buf = append(w.buf, ' ', ' ')
	}
}

// value places a value: after its key, or as the next array element.
func (w *JSONWriter) value() {
	if w.keyed {
		w.keyed = false
		return
	}
	if w.depth > 0 {
		w.next()
	}
}

// Key starts an object member.
func (w *JSONWriter) Key(k string) {
	w.next()
	w.buf = appendJSONString(w.buf, k)
	w.buf = append(w.buf, ':', ' ')
	w.keyed = true
}

// BeginObject opens an object.
func (w *JSONWriter) BeginObject() { w.begin('{') }

// EndObject closes an object.
func (w *JSONWriter) EndObject() { w.end('}') }

// BeginArray opens an array.
func (w *JSONWriter) BeginArray() { w.begin('[') }

// EndArray closes an array.
func (w *JSONWriter) EndArray() { w.end(']') }

func (w *JSONWriter) begin(c byte) {
	w.value()
	w.buf = append(w.buf, c)
	w.depth++
	w.open = true
}

func (w *JSONWriter) end(c byte) {
	w.depth--
	if !w.open {
		w.newline()
	}
	w.open = false
	w.buf = append(w.buf, c)
}

// String writes a string.
func (w *JSONWriter) String(s string) {
	w.value()
	w.buf = appendJSONString(w.buf, s)
}

// Int writes an integer.
func (w *JSONWriter) Int(n int) {
	w.value()
	// Indexes into the report's lists, tens of thousands of them, are
	// mostly below 1000.
	switch {
	case n >= 0 && n < 10:
		w.buf = append(w.buf, byte('0'+n))
	case n >= 10 && n < 100:
		w.buf = append(w.buf, byte('0'+n/10), byte('0'+n%10))
	case n >= 100 && n < 1000:
		w.buf = append(w.buf, byte('0'+n/100), byte('0'+n/10%10), byte('0'+n%10))
	default:
		w.buf = strconv.AppendInt(w.buf, int64(n), 10)
	}
}

// Bool writes true or false.
func (w *JSONWriter) Bool(b bool) {
	w.value()
	w.buf = strconv.AppendBool(w.buf, b)
}

// Raw writes b, one complete compact JSON value without newlines or
// characters to escape (such as time.Time's MarshalJSON), as it is.
func (w *JSONWriter) Raw(b []byte) {
	w.value()
	w.buf = append(w.buf, b...)
}

// jsonSafeLo and jsonSafeHi mark, bit by bit, the ASCII bytes a JSON
// string carries as they are: what json.Marshal leaves alone (it escapes
// controls, quote, backslash and, for HTML, <, > and &) less DEL, which
// escapeJSONish escapes. Constants rather than a table, so that nothing
// is built at start-up.
const (
	jsonSafeLo uint64 = 0xffffffff00000000 &^ (1<<'"' | 1<<'&' | 1<<'<' | 1<<'>')
	jsonSafeHi uint64 = (1<<63 - 1) &^ (1 << ('\\' - 64))
)

// jsonSafe reports whether ASCII byte b needs no escape in a JSON string.
func jsonSafe(b byte) bool {
	if b < 64 {
		return jsonSafeLo>>b&1 != 0
	}
	return jsonSafeHi>>(b-64)&1 != 0
}

// appendJSONString appends s as a quoted JSON string: json.Marshal's
// escapes followed by escapeJSONish's, in one pass.
func appendJSONString(dst []byte, s string) []byte {
	// Most strings (keys, names, messages) need no escape: copied at
	// once, after a test eight bytes at a time. Escaping byte by byte
	// was the largest single cost of `berth check --all -o json`.
	if plain(s) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if jsonSafe(b) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				// Other C0 controls, <, > and & as json.Marshal
				// writes them; DEL as escapeJSONish does.
				dst = appendU(dst, rune(b))
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029' || r <= 0x9f || r == 0xfffe || r == 0xffff:
			// U+2028 and U+2029 as json.Marshal writes them; the C1
			// controls (r <= 0x9f here), U+FFFE and U+FFFF as
			// escapeJSONish does.
			dst = append(dst, s[start:i]...)
			dst = appendU(dst, r)
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// plain reports whether s is all jsonSafe bytes.
func plain(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if escape8(load8(s, i)) {
			return false
		}
	}
	switch {
	case i == len(s):
		return true
	case len(s) >= 8:
		// The rest, with bytes already seen before it.
		return !escape8(load8(s, len(s)-8))
	}
	for ; i < len(s); i++ {
		if !jsonSafe(s[i]) {
			return false
		}
	}
	return true
}

// load8 returns s[i:i+8] as a little-endian word.
func load8(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// escape8 reports whether any of the eight bytes in x is not jsonSafe:
// below 0x20, at or above 0x7f, or one of " & < > \. Each test is the
// classic "has a zero byte" bit trick; carries between bytes can only
// follow a byte that already makes the answer true.
func escape8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below20 := (x - ones*0x20) &^ x
	above7e := (x + ones*(0x7f-0x7e)) | x
	// b|4 == 0x26 only for " and &; b|2 == 0x3e only for < and >.
	bs := x ^ (ones * '\\')
	qa := (x | ones*4) ^ (ones * 0x26)
	lg := (x | ones*2) ^ (ones * 0x3e)
	return (below20|above7e|(bs-ones)&^bs|(qa-ones)&^qa|(lg-ones)&^lg)&highs != 0
}
