package output

import "bytes"

// indentJSON appends src, JSON text as json.Marshal writes it, to dst,
// indented exactly as json.Indent(dst, src, "", indent) indents it. Only
// strings need care: json.Indent runs encoding/json's validating scanner
// over every byte, which for the 0.7 MB of `berth check --all -o json` took
// as long as the encoding; the input here is Marshal's own and valid, so
// finding the structure is enough. Whitespace between tokens is dropped,
// which for valid compact input makes no difference. FuzzIndentJSON holds
// it to json.Indent.
func indentJSON(dst, src []byte, indent string) []byte {
	depth := 0
	// An opening bracket's newline waits for the next token, so that an
	// empty object or array stays "{}" or "[]".
	needIndent := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if needIndent && c != '}' && c != ']' {
			needIndent = false
			depth++
			dst = appendNewline(dst, indent, depth)
		}
		switch c {
		case '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			needIndent = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			dst = appendNewline(dst, indent, depth)
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if needIndent {
				needIndent = false
			} else {
				depth--
				dst = appendNewline(dst, indent, depth)
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// stringEnd returns the index just past the string that starts with the
// quote at src[i] (len(src) when it is not closed).
func stringEnd(src []byte, i int) int {
	for j := i + 1; j < len(src); {
		k := bytes.IndexByte(src[j:], '"')
		if k < 0 {
			return len(src)
		}
		q := j + k
		// The quote is escaped when an odd number of backslashes
		// precedes it.
		n := 0
		for b := q - 1; b > i && src[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(src)
}

func appendNewline(dst []byte, indent string, depth int) []byte {
	dst = append(dst, '\n')
	for range depth {
		dst = append(dst, indent...)
	}
	return dst
}
