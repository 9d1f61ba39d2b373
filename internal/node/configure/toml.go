package configure

import (
	"fmt"
	"strconv"
	"strings"
)

// doc is a TOML document built in a fixed order, so that a rendered file is
// byte-for-byte reproducible (idempotent apply, golden files) and reads in
// the order Kata's own templates use rather than alphabetically.
type doc struct {
	b strings.Builder
}

// comment writes each line of text as a TOML comment.
func (d *doc) comment(text string) {
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if l == "" {
			d.b.WriteString("#\n")
			continue
		}
		d.b.WriteString("# " + l + "\n")
	}
}

// table starts [name]; parts are quoted when they are not bare keys.
func (d *doc) table(parts ...string) {
	if d.b.Len() > 0 {
		d.b.WriteByte('\n')
	}
	d.b.WriteString("[" + tomlKey(parts...) + "]\n")
}

// kv writes key = value for a string, bool, int or []string value.
func (d *doc) kv(key string, v any) {
	d.b.WriteString(key + " = " + tomlValue(v) + "\n")
}

func (d *doc) bytes() []byte { return []byte(d.b.String()) }

// tomlKey joins key parts, quoting those that are not bare keys.
func tomlKey(parts ...string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		if bareKey(p) {
			out[i] = p
		} else {
			out[i] = tomlString(p)
		}
	}
	return strings.Join(out, ".")
}

func bareKey(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return tomlString(x)
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case []string:
		q := make([]string, len(x))
		for i, s := range x {
			q[i] = tomlString(s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	panic(fmt.Sprintf("configure: no TOML form for %T", v))
}

// tomlString is a TOML basic string. strconv.Quote is not used because Go
// escapes (\x, \a, \v) are not TOML escapes.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
