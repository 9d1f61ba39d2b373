//go:build !jsongen

package facts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
)

// The generator reads the types of this package, so it is built with the
// jsongen tag, without this file and json_gen.go: a change to a type
// that breaks the generated code does not stop it from being rewritten.
//go:generate go run -tags jsongen ./jsongen -o json_gen.go

// MarshalJSON encodes f as encoding/json encodes the type by reflection
// (the tests hold the two equal, byte for byte), with code generated from
// the types (json_gen.go, by ./jsongen) instead: encoding/json builds an
// encoder for every type of Facts on first use, about a millisecond of
// CPU in each berth facts -o json and berth check, whose table shows the
// digest of this text. The methods are those of Facts only: a part of it
// encoded alone is encoded by reflection, to the same text.
func (f Facts) MarshalJSON() ([]byte, error) { return f.MarshalCompactJSON() }

// Digest returns "sha256:<hex>" of the canonical JSON of f: what
// json.Marshal writes, through the generated encoder. Reports, the agent
// and preflight name the facts they were computed from by it, so it
// belongs to the data model rather than to any one of them.
func (f *Facts) Digest() (string, error) {
	b, err := f.MarshalCompactJSON()
	if err != nil {
		return "", fmt.Errorf("encoding facts for the digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// MarshalCompactJSON is MarshalJSON without the copy of Facts a value
// receiver makes. Called directly (Digest), it also spares
// json.Marshal's second pass over a Marshaler's text, which
// validates and compacts it again: 9 ms for the 0.9 MB of a host with
// 4,096 PCI functions.
func (f *Facts) MarshalCompactJSON() ([]byte, error) {
	// About 200 bytes per PCI function and 10 KiB for the rest: the
	// buffer is sized once instead of doubled (and faulted in) a dozen
	// times on a big host.
	e := jsonEnc{b: make([]byte, 0, 16<<10+256*len(f.PCI))}
	e.encFacts(f)
	if e.err != nil {
		return nil, e.err
	}
	return e.b, nil
}

// MarshalIndentJSON is what json.MarshalIndent(f, "", "  ") writes (the
// tests hold the two equal), written indented at once: indenting the
// compact text afterwards was a second pass over all of it, 1.2 MB on a
// host with 4,096 PCI functions.
func (f *Facts) MarshalIndentJSON() ([]byte, error) {
	e := jsonEnc{b: make([]byte, 0, 16<<10+320*len(f.PCI)), indent: true}
	e.encFacts(f)
	if e.err != nil {
		return nil, e.err
	}
	return e.b, nil
}

// jsonEnc is the state of the generated encoder: the text so far and the
// first error (only a time outside the years 0-9999 has one). With
// indent, members and elements go on lines of their own, two spaces
// deeper per level (depth), as json.Indent puts them.
type jsonEnc struct {
	b      []byte
	err    error
	indent bool
	depth  int
}

// key starts an object member; start is where the object's first member
// begins, so that every other one is preceded by a comma.
func (e *jsonEnc) key(start int, k string) {
	if e.indent {
		e.indentedKey(start, k)
		return
	}
	if len(e.b) > start {
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, k...)
}

// indentedKey is key when indenting, out of line: key is inlined at each
// of the generated encoder's members, and this would double its code.
//
//go:noinline
func (e *jsonEnc) indentedKey(start int, k string) {
	e.sep(start)
	e.b = append(e.b, k...)
	e.b = append(e.b, ' ')
}

// sep starts a member or element of the object or array whose first one
// begins at start: a comma after another one, and, indented, a new line.
func (e *jsonEnc) sep(start int) {
	if len(e.b) > start {
		e.b = append(e.b, ',')
	}
	if e.indent {
		e.newline()
	}
}

func (e *jsonEnc) newline() {
	e.b = append(e.b, '\n')
	for range e.depth {
		e.b = append(e.b, "  "...)
	}
}

// open starts an object and returns where its first member begins.
func (e *jsonEnc) open() int { return e.begin('{') }

// close ends the object open returned start for.
func (e *jsonEnc) close(start int) { e.end(start, '}') }

func (e *jsonEnc) begin(c byte) int {
	e.b = append(e.b, c)
	e.depth++
	return len(e.b)
}

// end closes an object or array; an empty one stays "{}" or "[]".
func (e *jsonEnc) end(start int, c byte) {
	e.depth--
	if e.indent && len(e.b) > start {
		e.newline()
	}
	e.b = append(e.b, c)
}

func (e *jsonEnc) null() { e.b = append(e.b, "null"...) }

func (e *jsonEnc) intPtr(p *int) {
	if p == nil {
		e.null()
		return
	}
	e.int(int64(*p))
}

func (e *jsonEnc) boolPtr(p *bool) {
	if p == nil {
		e.null()
		return
	}
	e.bool(*p)
}

func (e *jsonEnc) strs(s []string) {
	encSlice(e, s, func(e *jsonEnc, v *string) { e.str(*v) })
}

func (e *jsonEnc) strMap(m map[string]string) {
	encMap(e, m, func(e *jsonEnc, v *string) { e.str(*v) })
}

func (e *jsonEnc) int64Map(m map[string]int64) {
	encMap(e, m, func(e *jsonEnc, v *int64) { e.int(*v) })
}

// encPtr, encSlice and encMap encode a pointer, slice or string-keyed map
// whose elements enc encodes: nil as null, map keys sorted, as
// encoding/json does.
func encPtr[T any](e *jsonEnc, p *T, enc func(*jsonEnc, *T)) {
	if p == nil {
		e.null()
		return
	}
	enc(e, p)
}

func encSlice[T any](e *jsonEnc, s []T, enc func(*jsonEnc, *T)) {
	if s == nil {
		e.null()
		return
	}
	start := e.begin('[')
	for i := range s {
		e.sep(start)
		enc(e, &s[i])
	}
	e.end(start, ']')
}

func encMap[T any](e *jsonEnc, m map[string]T, enc func(*jsonEnc, *T)) {
	if m == nil {
		e.null()
		return
	}
	start := e.open()
	for _, k := range slices.Sorted(maps.Keys(m)) {
		e.sep(start)
		e.str(k)
		e.b = append(e.b, ':')
		if e.indent {
			e.b = append(e.b, ' ')
		}
		v := m[k]
		enc(e, &v)
	}
	e.close(start)
}

func (e *jsonEnc) bool(v bool) { e.b = strconv.AppendBool(e.b, v) }

func (e *jsonEnc) int(v int64) { e.b = strconv.AppendInt(e.b, v, 10) }

func (e *jsonEnc) uint(v uint64) { e.b = strconv.AppendUint(e.b, v, 10) }

// str appends s quoted. Nearly every string of Facts is printable ASCII
// without a character encoding/json escapes, and is copied as it is; any
// other is quoted by encoding/json itself, so that its escapes (HTML
// characters, U+2028, invalid UTF-8) are encoding/json's exactly.
func (e *jsonEnc) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(s)
			if err != nil && e.err == nil {
				e.err = err
			}
			e.b = append(e.b, q...)
			return
		}
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, s...)
	e.b = append(e.b, '"')
}

// time appends t as its MarshalJSON does, which encoding/json calls.
func (e *jsonEnc) time(t time.Time) {
	q, err := t.MarshalJSON()
	if err != nil {
		if e.err == nil {
			e.err = fmt.Errorf("encoding a time: %w", err)
		}
		e.null()
		return
	}
	e.b = append(e.b, q...)
}
