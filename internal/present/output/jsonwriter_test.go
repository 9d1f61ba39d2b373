package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// jsonStrings are strings whose escapes differ between the characters
// json.Marshal escapes, those escapeJSONish adds and those both leave.
var jsonStrings = []string{
	"", "plain", `quote " and backslash \`, "<a href=\"x\">&amp;</a>",
	"\x00\x01\b\f\n\r\t\x1b\x1f", "del \x7f", "c1 \u0080\u0085\u009b\u009f", "\u00a0 after c1",
	"\u2028\u2029", "\ufffd\ufffe\uffff", "invalid \xff\xfe \xc3 end", "cut \xe2\x80",
	"ünïcödé 日本 🚀", "\u202e bidi", "\\u0000 literal",
}

// TestAppendJSONString holds the one-pass string encoder to json.Marshal
// followed by escapeJSONish.
func TestAppendJSONString(t *testing.T) {
	for _, s := range jsonStrings {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want = escapeJSONish(want)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q:\ngot  %s\nwant %s", s, got, want)
		}
	}
}

// FuzzAppendJSONString compares appendJSONString with json.Marshal and
// escapeJSONish on any string.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		want = escapeJSONish(want)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q:\ngot  %s\nwant %s", s, got, want)
		}
	})
}

// jsonDoc is a value written both ways in TestJSONWriter.
type jsonDoc struct {
	S     string            `json:"s"`
	N     int               `json:"n"`
	B     bool              `json:"b"`
	T     time.Time         `json:"t"`
	Empty []int             `json:"empty"`
	None  map[string]string `json:"none"`
	List  []jsonDoc         `json:"list,omitempty"`
	Ints  [][]int           `json:"ints,omitempty"`
}

// appendDoc writes d as encoding/json would, through a JSONWriter.
func appendDoc(w *JSONWriter, d jsonDoc) {
	w.BeginObject()
	w.Key("s")
	w.String(d.S)
	w.Key("n")
	w.Int(d.N)
	w.Key("b")
	w.Bool(d.B)
	w.Key("t")
	t, _ := d.T.MarshalJSON()
	w.Raw(t)
	w.Key("empty")
	w.BeginArray()
	w.EndArray()
	w.Key("none")
	w.BeginObject()
	w.EndObject()
	if len(d.List) > 0 {
		w.Key("list")
		w.BeginArray()
		for _, e := range d.List {
			appendDoc(w, e)
		}
		w.EndArray()
	}
	if len(d.Ints) > 0 {
		w.Key("ints")
		w.BeginArray()
		for _, l := range d.Ints {
			w.BeginArray()
			for _, n := range l {
				w.Int(n)
			}
			w.EndArray()
		}
		w.EndArray()
	}
	w.EndObject()
}

// TestJSONWriter holds the writer's layout (nesting, empty containers,
// commas, numbers, raw values) to what EncodeJSON makes of the same value
// with encoding/json.
func TestJSONWriter(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))
	tests := []struct {
		name string
		doc  jsonDoc
	}{
		{"flat", jsonDoc{S: "a", N: -12, B: true, T: at, Empty: []int{}, None: map[string]string{}}},
		{"nested", jsonDoc{S: "<&>", N: 1 << 40, T: at, Empty: []int{}, None: map[string]string{},
			List: []jsonDoc{{S: "x", Empty: []int{}, None: map[string]string{}, Ints: [][]int{{}, {1, 2}, {0, 9, 10, 99, 100, 999, 1000, 12345, -1, -100}}}},
			Ints: [][]int{{0}}}},
	}
	// Deeper than the indentation written at once.
	deep := jsonDoc{S: "leaf", Empty: []int{}, None: map[string]string{}, Ints: [][]int{{1}}}
	for range 20 {
		deep = jsonDoc{S: "level", Empty: []int{}, None: map[string]string{}, List: []jsonDoc{deep}}
	}
	tests = append(tests, struct {
		name string
		doc  jsonDoc
	}{"deep", deep})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := EncodeJSON(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			var w JSONWriter
			appendDoc(&w, tt.doc)
			if got := append(w.Bytes(), '\n'); !bytes.Equal(got, want) {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestEscape8 holds the eight-byte test to jsonSafe: every byte value at
// every position, and every pair of neighbours (where a carry could leak
// from one byte into the next), among plain bytes.
func TestEscape8(t *testing.T) {
	word := func(bs ...byte) uint64 { return load8(string(bs), 0) }
	for pos := range 8 {
		for b := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(b)
			if got, want := escape8(word(w...)), !jsonSafe(byte(b)) || b >= 0x80; got != want {
				t.Fatalf("byte %#x at %d: escape8 %v, want %v", b, pos, got, want)
			}
		}
	}
	for pos := range 7 {
		for b1 := range 256 {
			for b2 := range 256 {
				w := []byte("zzzzzzzz")
				w[pos], w[pos+1] = byte(b1), byte(b2)
				want := !jsonSafe(byte(b1)) || b1 >= 0x80 || !jsonSafe(byte(b2)) || b2 >= 0x80
				if got := escape8(word(w...)); got != want {
					t.Fatalf("bytes %#x %#x at %d: escape8 %v, want %v", b1, b2, pos, got, want)
				}
			}
		}
	}
}

// bigDoc is a JSONAppender of n strings, larger than a chunk when n is.
type bigDoc struct {
	n   int
	err error
}

func (d bigDoc) AppendJSON(w *JSONWriter) error {
	w.BeginArray()
	for i := range d.n {
		w.String("item <" + strings.Repeat("x", i%50) + ">")
	}
	w.EndArray()
	return d.err
}

// chunks records the writes it gets; after fail of them it fails.
type chunks struct {
	writes [][]byte
	fail   int
}

func (c *chunks) Write(p []byte) (int, error) {
	if c.fail > 0 && len(c.writes) >= c.fail {
		return 0, errors.New("disk full")
	}
	c.writes = append(c.writes, bytes.Clone(p))
	return len(p), nil
}

// TestRenderStreams: Render passes a JSONAppender's text on in chunks,
// whose concatenation is EncodeJSON's; a write error is returned; an
// appender failing before it wrote anything is encoded by encoding/json.
func TestRenderStreams(t *testing.T) {
	tests := []struct {
		name       string
		doc        bigDoc
		fail       int
		wantWrites int // at least
		wantErr    string
	}{
		{"small", bigDoc{n: 3}, 0, 1, ""},
		{"large", bigDoc{n: 20000}, 0, 10, ""},
		{"write error", bigDoc{n: 20000}, 2, 2, "disk full"},
		{"appender error after writing", bigDoc{n: 20000, err: errors.New("broken")}, 0, 1, "broken"},
		{"appender error before writing", bigDoc{n: 3, err: errors.New("broken")}, 0, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &chunks{fail: tt.fail}
			err := Render(c, JSON, tt.doc, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.writes) < tt.wantWrites {
				t.Errorf("%d writes, want at least %d", len(c.writes), tt.wantWrites)
			}
			var want []byte
			if tt.doc.err == nil {
				var w JSONWriter
				tt.doc.AppendJSON(&w)
				want = append(w.Bytes(), '\n')
			} else {
				// encoding/json of the value itself: its exported
				// fields, none.
				want = []byte("{}\n")
			}
			if got := bytes.Join(c.writes, nil); !bytes.Equal(got, want) {
				t.Errorf("wrote %d bytes, want %d:\n%.200s", len(got), len(want), got)
			}
		})
	}
}
