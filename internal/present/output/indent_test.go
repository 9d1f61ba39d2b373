package output

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// indentCases are JSON texts whose indentation must match json.Indent's:
// empty containers, nesting, and strings holding brackets, quotes and
// backslashes in every arrangement.
var indentCases = []string{
	`{}`, `[]`, `{"a":{}}`, `[[],{}]`, `{"a":[1,2,{"b":null}],"c":"d"}`,
	`"plain"`, `12.5e3`, `true`, `null`,
	`{"s":"{[,:]}"}`, `{"q":"a\"b","r":"\\","t":"\\\"","u":"\\\\"}`,
	`["\u2028\u003c",{"":""}]`, `{"k":"x\\"}`, `[{"a":[{"b":[{}]}]},[[[]]]]`,
	`{"a" : [ 1 , 2 ] ,"b":{ }}`,
}

func TestIndentJSON(t *testing.T) {
	for _, in := range indentCases {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(in), "", "  "); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if got := indentJSON(nil, []byte(in), "  "); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s:\ngot  %s\nwant %s", in, got, want.Bytes())
		}
	}
}

// FuzzIndentJSON holds indentJSON to json.Indent on any valid JSON,
// compacted as json.Marshal writes it.
func FuzzIndentJSON(f *testing.F) {
	for _, in := range indentCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var compact, want bytes.Buffer
		if err := json.Compact(&compact, b); err != nil {
			t.Fatal(err)
		}
		if err := json.Indent(&want, compact.Bytes(), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got := indentJSON(nil, compact.Bytes(), "  "); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%q:\ngot  %q\nwant %q", compact.Bytes(), got, want.Bytes())
		}
	})
}

// escapeJSONishByRune is escapeJSONish written rune by rune, the reference
// the run-copying one is held to.
func escapeJSONishByRune(j []byte) []byte {
	var out []byte
	for i := 0; i < len(j); {
		r, size := utf8.DecodeRune(j[i:])
		if r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0xfffe || r == 0xffff {
			out = appendU(out, r)
		} else {
			out = append(out, j[i:i+size]...)
		}
		i += size
	}
	return out
}

var escapeJSONishCases = []string{
	"", "plain ascii", `{"a":"\u0085"}`, "\x7f", "a\u0085b", "\ufffe\uffff", "é — ü",
	"\xff\xfe bad utf-8", "mixed \u009f and é and \x7f end", "\u00a0\u2028",
}

func TestEscapeJSONish(t *testing.T) {
	for _, in := range escapeJSONishCases {
		if got, want := escapeJSONish([]byte(in)), escapeJSONishByRune([]byte(in)); !bytes.Equal(got, want) {
			t.Errorf("escapeJSONish(%q) = %q, want %q", in, got, want)
		}
	}
	if got := string(escapeJSONish([]byte("a\u0085b\x7f"))); got != `a\u0085b\u007f` {
		t.Errorf("got %q", got)
	}
}

func FuzzEscapeJSONish(f *testing.F) {
	for _, in := range escapeJSONishCases {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := escapeJSONish(b), escapeJSONishByRune(b); !bytes.Equal(got, want) {
			t.Errorf("escapeJSONish(%q) = %q, want %q", b, got, want)
		}
	})
}

// indentOnly writes its JSON through MarshalIndentJSON; its MarshalJSON
// says something else, so that the test sees which one EncodeJSON used.
type indentOnly struct{}

func (indentOnly) MarshalIndentJSON() ([]byte, error) {
	return []byte("{\n  \"a\": \"\x7f\"\n}"), nil
}
func (indentOnly) MarshalJSON() ([]byte, error) { return []byte(`"not this"`), nil }

// TestEncodeJSONIndentMarshaler takes an IndentMarshaler's text as it
// is, with the newline and the escapes Render adds to any JSON.
func TestEncodeJSONIndentMarshaler(t *testing.T) {
	got, err := EncodeJSON(indentOnly{})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"a\": \"\\u007f\"\n}\n"
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
