// Package output renders command results as a table, JSON or YAML, the
// three formats every berth command offers in the way kubectl does.
package output

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// Format is one of the output formats selected with -o.
type Format string

// The formats accepted by -o. Commands may accept more (for example nfd), but
// these three are understood by Render.
const (
	Table Format = "table"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// ParseFormat validates the value of -o against the formats a command accepts.
func ParseFormat(s string, allowed ...Format) (Format, error) {
	if len(allowed) == 0 {
		allowed = []Format{Table, JSON, YAML}
	}
	f := Format(strings.ToLower(strings.TrimSpace(s)))
	for _, a := range allowed {
		if f == a {
			return f, nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return "", fmt.Errorf("unknown output format %q: expected one of %s", s, strings.Join(names, ", "))
}

// Render writes v as JSON or YAML, or calls table for the human format.
// JSON is indented and ends with a newline so it diffs well in golden files.
//
// Host strings may hold any bytes. The table goes through an EscapeWriter,
// so that none reaches the terminal as a control sequence. JSON and YAML
// encode every string without failing: control characters as escapes
// (encoding/json writes C0 as \u00XX; berth also writes DEL, C1, U+FFFE and
// U+FFFF as \u escapes, which YAML needs and terminals prefer), and they
// decode back to the same string. Invalid UTF-8 cannot be represented in
// JSON or YAML strings: encoding/json replaces each invalid byte with
// U+FFFD, and so does the YAML output, which is made from the JSON.
func Render(w io.Writer, f Format, v any, table func(io.Writer) error) error {
	return render(w, f, v, table, false)
}

// RenderStyled is Render for a table that paints with colour itself: its
// own style sequences (ESC [ ... m) pass the escaping, and it must escape
// the host strings it prints with Escape.
func RenderStyled(w io.Writer, f Format, v any, table func(io.Writer) error) error {
	return render(w, f, v, table, true)
}

// Wire is implemented by a value whose JSON is another value's: Render
// encodes WireValue() directly. Its MarshalJSON gives the same bytes, but
// encoding/json would then re-read them to compact them before indenting:
// for `berth check --all` that second pass over 0.7 MB cost 6% of the
// command.
type Wire interface {
	WireValue() any
}

// tableBuffer is how much of a table is written at once.
const tableBuffer = 16 << 10

func render(w io.Writer, f Format, v any, table func(io.Writer) error, sgr bool) error {
	if a, ok := v.(JSONAppender); ok && f == JSON {
		jw := JSONWriter{sink: w}
		err := a.AppendJSON(&jw)
		switch {
		case err == nil:
			jw.buf = append(jw.buf, '\n')
			jw.flush()
			return jw.sinkErr
		case jw.flushed:
			return err
		}
		// Nothing was written yet: encoding/json says what is wrong.
	}
	if f == JSON {
		b, err := EncodeJSON(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if wv, ok := v.(Wire); ok && f != Table && f != "" {
		v = wv.WireValue()
	}
	switch f {
	case YAML:
		b, err := MarshalYAML(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case Table, "":
		if table == nil {
			return errNoTable
		}
		// A table is written a line or a cell at a time: unbuffered,
		// that was a write(2) each (83 for a check report), ~4 µs apiece
		// to a pipe and more to a terminal. What was written before an
		// error is still flushed.
		bw := bufio.NewWriterSize(w, tableBuffer)
		ew := NewEscapeWriter(bw, sgr)
		err := table(ew)
		if ferr := ew.Flush(); err == nil {
			err = ferr
		}
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		return err
	default:
		return fmt.Errorf("unknown output format %q", f)
	}
}

// IndentMarshaler is implemented by a value (facts.Facts) whose
// MarshalIndentJSON returns exactly what json.MarshalIndent(v, "", "  ")
// writes for it, held to that by its own tests: EncodeJSON takes that text
// as it is, instead of indenting the compact text in a second pass.
type IndentMarshaler interface {
	MarshalIndentJSON() ([]byte, error)
}

// EncodeJSON returns what Render writes for v with -o json: indented JSON
// and a newline. A JSONAppender writes itself, an IndentMarshaler
// indents itself; any other value (or a JSONAppender that fails) is
// encoded by encoding/json, through WireValue for a Wire.
func EncodeJSON(v any) ([]byte, error) {
	if a, ok := v.(JSONAppender); ok {
		var jw JSONWriter
		if err := a.AppendJSON(&jw); err == nil {
			return append(jw.buf, '\n'), nil
		}
	}
	if m, ok := v.(IndentMarshaler); ok {
		b, err := m.MarshalIndentJSON()
		if err != nil {
			return nil, err
		}
		return escapeJSONish(append(b, '\n')), nil
	}
	if wv, ok := v.(Wire); ok {
		v = wv.WireValue()
	}
	// What json.Encoder with SetIndent writes, indented by indentJSON
	// into a buffer sized from the compact JSON at once (the encoder
	// grows its buffer by doubling, and json.Indent validates every byte
	// again).
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := indentJSON(make([]byte, 0, 2*len(b)+1), b, "  ")
	out = append(out, '\n')
	return escapeJSONish(out), nil
}

// MarshalYAML encodes v as sigs.k8s.io/yaml does (through its JSON form,
// so JSON field names and omitempty apply), without failing on strings
// that hold DEL or C1 controls: sigs.k8s.io/yaml parses the JSON text
// with a YAML parser, which rejects those characters raw ("yaml: control
// characters are not allowed"), so they are given to it as JSON \u
// escapes; the YAML emitter then writes them double-quoted and escaped
// ("\x7F", "\e", "\N"), and they decode back to the same string.
func MarshalYAML(v any) ([]byte, error) {
	j, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	b, err := yaml.JSONToYAML(escapeJSONish(j))
	if err != nil {
		return nil, fmt.Errorf("encoding YAML: %w", err)
	}
	return b, nil
}

// ColorEnabled reports whether coloured output is allowed: only on a
// terminal, never when NO_COLOR is set (https://no-color.org) or --no-color
// was given.
func ColorEnabled(w io.Writer, noColorFlag bool, getenv func(string) string) bool {
	if noColorFlag || getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := Underlying(w).(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	return fi.Mode()&os.ModeCharDevice != 0
}
