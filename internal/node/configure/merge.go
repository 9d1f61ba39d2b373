package configure

import (
	"bytes"
	"fmt"
	"strings"
)

// Where is where a block goes in a file that does not have it yet.
type Where uint8

const (
	// End appends the block: TOML tables can be added at the end of any
	// document whose tables are not inline.
	End Where = iota
	// Top inserts the block before the first table header: top-level keys
	// such as imports must precede every table.
	Top
	// ReplaceKey puts the block in place of the top-level key named like
	// the block (imports), keeping the lines it replaced as "#| " comments
	// inside the block so that removing it puts them back; a file without
	// the key gets the block as with Top. A TOML key may appear only once,
	// so a second one beside the file's own would make the file invalid.
	ReplaceKey
)

const (
	beginPrefix = "# BEGIN berth:"
	endPrefix   = "# END berth:"
	// nlFlag marks a block whose insertion added the newline the file
	// lacked at its end, so that removing it restores the file exactly.
	nlFlag = " +nl"
	// savedPrefix starts each line a ReplaceKey block replaced.
	savedPrefix = "#| "
)

type span struct {
	start, bodyStart, bodyEnd, end int // byte offsets; [start,end) is the whole block
	flagged                        bool
}

// lines yields the offsets of each line (without its newline).
func lineAt(data []byte, off int) (line []byte, next int) {
	i := bytes.IndexByte(data[off:], '\n')
	if i < 0 {
		return data[off:], len(data)
	}
	return data[off : off+i], off + i + 1
}

// findBlock locates block id. A BEGIN without its END is an error: the
// file was edited by hand and berth cannot tell what it owns.
func findBlock(file string, data []byte, id string) (span, bool, error) {
	begin, end := beginPrefix+id, endPrefix+id
	for off, lineNo := 0, 1; off < len(data); lineNo++ {
		line, next := lineAt(data, off)
		if s := string(line); s == begin || s == begin+nlFlag {
			sp := span{start: off, bodyStart: next, flagged: s != begin}
			for o2 := next; o2 < len(data); {
				l2, n2 := lineAt(data, o2)
				if string(l2) == end {
					sp.bodyEnd, sp.end = o2, n2
					return sp, true, nil
				}
				o2 = n2
			}
			return span{}, false, fmt.Errorf("%s:%d: berth block %q has no %q line: restore it or remove the block by hand", file, lineNo, id, end)
		}
		off = next
	}
	return span{}, false, nil
}

// Blocks lists the IDs of the berth blocks in data, in file order.
func Blocks(data []byte) []string {
	var ids []string
	for off := 0; off < len(data); {
		line, next := lineAt(data, off)
		if s, ok := strings.CutPrefix(string(line), beginPrefix); ok {
			ids = append(ids, strings.TrimSuffix(s, nlFlag))
		}
		off = next
	}
	return ids
}

// MergeBlock puts body into data as berth block id: replaced in place when
// the block exists (other blocks and the rest of the file are untouched),
// else inserted at where. The result is data unchanged when the block
// already holds body, so a second apply changes nothing.
func MergeBlock(file string, data []byte, id string, body []byte, where Where) ([]byte, error) {
	if id == "" || strings.ContainsAny(id, " \n\r") {
		return nil, fmt.Errorf("block id %q: expected a non-empty name without spaces", id)
	}
	if len(body) > 0 && body[len(body)-1] != '\n' {
		body = append(append([]byte{}, body...), '\n')
	}
	if bytes.Contains(body, []byte(beginPrefix)) || bytes.Contains(body, []byte(endPrefix)) {
		return nil, fmt.Errorf("block %q: body contains a berth marker", id)
	}
	if where == ReplaceKey {
		return replaceKey(file, data, id, body)
	}
	sp, ok, err := findBlock(file, data, id)
	if err != nil {
		return nil, err
	}
	if ok {
		out := make([]byte, 0, len(data)-(sp.bodyEnd-sp.bodyStart)+len(body))
		out = append(out, data[:sp.bodyStart]...)
		out = append(out, body...)
		return append(out, data[sp.bodyEnd:]...), nil
	}
	block := func(flag string) []byte {
		return []byte(beginPrefix + id + flag + "\n" + string(body) + endPrefix + id + "\n")
	}
	at := len(data)
	if where == Top {
		for off := 0; off < len(data); {
			line, next := lineAt(data, off)
			if t := bytes.TrimLeft(line, " \t"); len(t) > 0 && t[0] == '[' {
				at = off
				break
			}
			off = next
		}
	}
	out := make([]byte, 0, len(data)+len(body)+64)
	out = append(out, data[:at]...)
	if at == len(data) && at > 0 && data[at-1] != '\n' {
		out = append(out, '\n')
		out = append(out, block(nlFlag)...)
	} else {
		out = append(out, block("")...)
	}
	return append(out, data[at:]...), nil
}

// RemoveBlock removes berth block id from data, restoring exactly what was
// there before it was merged (the newline it added at the end of a file
// included). removed is false when there was no such block.
func RemoveBlock(file string, data []byte, id string) (out []byte, removed bool, err error) {
	sp, ok, err := findBlock(file, data, id)
	if err != nil || !ok {
		return data, false, err
	}
	rest := data[sp.end:]
	start := sp.start
	if saved, ok := savedLines(data[sp.bodyStart:sp.bodyEnd]); ok {
		if sp.flagged && len(rest) == 0 {
			saved = saved[:len(saved)-1] // the key was the last line, without a newline
		}
		out = make([]byte, 0, len(data))
		out = append(out, data[:start]...)
		out = append(out, saved...)
		return append(out, rest...), true, nil
	}
	var prefix []byte
	if sp.flagged {
		if len(rest) == 0 && start > 0 && data[start-1] == '\n' {
			// The newline was added for this block: take it back.
			start--
		} else if line, _ := lineAt(rest, 0); bytes.HasPrefix(line, []byte(beginPrefix)) && !bytes.HasSuffix(line, []byte(nlFlag)) {
			// A later block now ends the file: it inherits the flag.
			line, next := lineAt(rest, 0)
			prefix = append(append(append([]byte{}, line...), nlFlag...), '\n')
			rest = rest[next:]
		}
	}
	out = make([]byte, 0, len(data))
	out = append(out, data[:start]...)
	out = append(out, prefix...)
	return append(out, rest...), true, nil
}

// savedLines returns the lines a ReplaceKey block replaced, newline
// terminated, from the "#| " lines that open its body.
func savedLines(body []byte) ([]byte, bool) {
	var out []byte
	for off := 0; off < len(body); {
		line, next := lineAt(body, off)
		rest, ok := bytes.CutPrefix(line, []byte(savedPrefix))
		if !ok {
			break
		}
		out = append(append(out, rest...), '\n')
		off = next
	}
	return out, out != nil
}

// replaceKey puts body as block id in place of the top-level key id (see
// ReplaceKey). An existing block is first taken out, which puts the
// original key back, so that the result depends only on the original.
func replaceKey(file string, data []byte, id string, body []byte) ([]byte, error) {
	data, _, err := RemoveBlock(file, data, id)
	if err != nil {
		return nil, err
	}
	start, end, ok, err := topKeySpan(file, data, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return MergeBlock(file, data, id, body, Top)
	}
	flag := ""
	orig := data[start:end]
	if len(orig) == 0 || orig[len(orig)-1] != '\n' {
		flag = nlFlag
		orig = append(append([]byte{}, orig...), '\n')
	}
	var b bytes.Buffer
	b.WriteString(beginPrefix + id + flag + "\n")
	for off := 0; off < len(orig); {
		line, next := lineAt(orig, off)
		b.WriteString(savedPrefix)
		b.Write(line)
		b.WriteByte('\n')
		off = next
	}
	b.Write(body)
	b.WriteString(endPrefix + id + "\n")
	out := make([]byte, 0, len(data)+b.Len())
	out = append(out, data[:start]...)
	out = append(out, b.Bytes()...)
	return append(out, data[end:]...), nil
}

// topKeySpan finds the lines of top-level key in a TOML document: from the
// start of its line to the end of the line its value ends on (values may
// span lines: arrays, multi-line strings). Top level is everything before
// the first table header.
func topKeySpan(file string, data []byte, key string) (start, end int, found bool, err error) {
	for off, lineNo := 0, 1; off < len(data); {
		line, next := lineAt(data, off)
		t := bytes.TrimLeft(line, " \t")
		switch {
		case len(t) == 0 || t[0] == '#':
			off, lineNo = next, lineNo+1
			continue
		case t[0] == '[':
			return 0, 0, false, nil
		}
		eq := bytes.IndexByte(t, '=')
		if eq < 0 {
			return 0, 0, false, fmt.Errorf("%s:%d: expected a key = value line", file, lineNo)
		}
		k := string(bytes.TrimSpace(t[:eq]))
		vend, lines, err := valueEnd(data, off+len(line)-len(t)+eq+1)
		if err != nil {
			return 0, 0, false, fmt.Errorf("%s:%d: %w", file, lineNo, err)
		}
		if k == key || k == `"`+key+`"` || k == "'"+key+"'" {
			return off, vend, true, nil
		}
		off, lineNo = vend, lineNo+lines
	}
	return 0, 0, false, nil
}

// valueEnd scans a TOML value starting at off and returns the offset just
// past the newline of the line it ends on, and how many lines it took. It
// tracks brackets, braces, strings (basic, literal, multi-line) and
// comments, enough to find the end, not to validate.
func valueEnd(data []byte, off int) (int, int, error) {
	depth, lines := 0, 1
	for i := off; i < len(data); i++ {
		c := data[i]
		switch {
		case c == '\n':
			if depth == 0 {
				return i + 1, lines, nil
			}
			lines++
		case c == '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			i--
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
		case c == '"' || c == '\'':
			q := string(c)
			if bytes.HasPrefix(data[i:], []byte(q+q+q)) {
				j := bytes.Index(data[i+3:], []byte(q+q+q))
				if j < 0 {
					return 0, 0, fmt.Errorf("unterminated multi-line string")
				}
				// Up to two more quotes may close the string.
				k := i + 3 + j + 3
				for k < len(data) && data[k] == c && k-(i+3+j+3) < 2 {
					k++
				}
				lines += bytes.Count(data[i:k], []byte("\n"))
				i = k - 1
				continue
			}
			j := i + 1
			for ; j < len(data) && data[j] != c && data[j] != '\n'; j++ {
				if c == '"' && data[j] == '\\' {
					j++
				}
			}
			if j >= len(data) || data[j] != c {
				return 0, 0, fmt.Errorf("unterminated string")
			}
			i = j
		}
	}
	return len(data), lines, nil
}
