package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"sigs.k8s.io/yaml"
)

// hostile are host strings with every kind of byte a terminal acts on.
var hostile = []string{
	"Dell\x1b[2J\x1b]0;pwned\x07 Inc.", // ESC[2J clears the screen, OSC sets the title, BEL
	"del\x7fend",                       // DEL: sigs.k8s.io/yaml refused it raw
	"c1 \u009b31m csi and \u0085 nel",  // C1 CSI (an 8-bit ESC[) and NEL
	"bidi \u202eevil\u202c",            // right-to-left override
	"ls\u2028ps\u2029",                 // line and paragraph separators
	"bad \xff\xfe utf-8 \xc2",          // invalid UTF-8, a cut sequence at the end
	"nul\x00 cr\r tab\t nl\n",          // C0 layout and NUL
	"\ufffe\uffff noncharacters",       // YAML rejects them raw
	"plain Ünïcödé 日本 ✔",               // must stay as it is
}

// rawControl reports the first raw control character, bidi control or
// invalid byte in s, other than the newlines and tabs kept.
func rawControl(s string, keepLayout bool) (rune, bool) {
	for i, r := range s {
		switch {
		case keepLayout && (r == '\n' || r == '\t'):
		case r < 0x20 || r == 0x7f || unsafeRune(r):
			return r, true
		case r == 0xfffd && !strings.HasPrefix(s[i:], "\ufffd"):
			return r, true // an invalid byte
		}
	}
	return 0, false
}

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"Dell\x1b[2J Inc.":     `Dell\x1b[2J Inc.`,
		"bel\a del\x7f":        `bel\x07 del\x7f`,
		"c1 \u009b nel \u0085": `c1 \u009b nel \u0085`,
		"bad \xff\xfe":         `bad \xff\xfe`,
		"t\tn\nr\r":            `t\tn\nr\r`,
		"rlo \u202e":           `rlo \u202e`,
		"plain Ünïcödé ✔":      "plain Ünïcödé ✔",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	if got := EscapeText("line 1\n\tline 2\x1b[K"); got != "line 1\n\tline 2\\x1b[K" {
		t.Errorf("EscapeText keeps layout: %q", got)
	}
	for _, s := range hostile {
		if r, bad := rawControl(Escape(s), false); bad {
			t.Errorf("Escape(%q) keeps %U", s, r)
		}
		if e := Escape(s); Escape(e) != e {
			t.Errorf("Escape is not idempotent on %q", s)
		}
	}
}

func TestEscapeWriter(t *testing.T) {
	all := strings.Join(hostile, "|")
	want := EscapeText(all)
	// Written whole, and byte by byte (cutting every UTF-8 sequence).
	for _, step := range []int{len(all), 1, 2, 3} {
		var buf bytes.Buffer
		ew := NewEscapeWriter(&buf, false)
		for i := 0; i < len(all); i += step {
			if _, err := ew.Write([]byte(all[i:min(i+step, len(all))])); err != nil {
				t.Fatal(err)
			}
		}
		if err := ew.Flush(); err != nil {
			t.Fatal(err)
		}
		if buf.String() != want {
			t.Errorf("step %d:\n got %q\nwant %q", step, buf.String(), want)
		}
		if r, bad := rawControl(buf.String(), true); bad {
			t.Errorf("step %d: %U passed", step, r)
		}
	}
	// With sgr, berth's own colours pass, cut or not; nothing else does.
	in := "\x1b[1mbold\x1b[0m \x1b[31m✖ FAIL\x1b[0m \x1b[2J \x1b]0;t\x07 \x1b[1;31m"
	for _, step := range []int{len(in), 1} {
		var buf bytes.Buffer
		ew := NewEscapeWriter(&buf, true)
		for i := 0; i < len(in); i += step {
			ew.Write([]byte(in[i:min(i+step, len(in))]))
		}
		ew.Flush()
		if want := "\x1b[1mbold\x1b[0m \x1b[31m✖ FAIL\x1b[0m \\x1b[2J \\x1b]0;t\\x07 \x1b[1;31m"; buf.String() != want {
			t.Errorf("sgr step %d:\n got %q\nwant %q", step, buf.String(), want)
		}
	}
	// The first write error sticks.
	ew := NewEscapeWriter(failWriter{}, false)
	if _, err := ew.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write: %v", err)
	}
	if _, err := ew.Write([]byte("y")); !errors.Is(err, syscall.EPIPE) || !errors.Is(ew.Flush(), syscall.EPIPE) {
		t.Errorf("later writes: %v", err)
	}
}

// replaceInvalid is what encoding/json makes of invalid UTF-8: U+FFFD for
// each invalid byte.
func replaceInvalid(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // an invalid byte ranges as one utf8.RuneError
	}
	return b.String()
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

type doc struct {
	Vendor string   `json:"vendor"`
	Args   []string `json:"args,omitempty"`
}

// TestRenderHostileStrings renders every hostile string as JSON and YAML
// (which sigs.k8s.io/yaml refused for DEL, C1 and U+FFFE), decodes it back
// and compares. Invalid UTF-8 cannot be carried by either: each invalid
// byte becomes U+FFFD, as encoding/json does.
func TestRenderHostileStrings(t *testing.T) {
	for _, s := range hostile {
		in := doc{Vendor: s, Args: []string{s, "ok"}}
		want := replaceInvalid(s)
		for _, f := range []Format{JSON, YAML} {
			var buf bytes.Buffer
			if err := Render(&buf, f, in, nil); err != nil {
				t.Errorf("%s of %q: %v", f, s, err)
				continue
			}
			var back doc
			var err error
			if f == JSON {
				err = json.Unmarshal(buf.Bytes(), &back)
			} else {
				err = yaml.Unmarshal(buf.Bytes(), &back)
			}
			if err != nil {
				t.Errorf("%s of %q does not decode: %v\n%s", f, s, err, buf.String())
				continue
			}
			if back.Vendor != want || back.Args[0] != want {
				t.Errorf("%s of %q decodes to %q", f, s, back.Vendor)
			}
			// No raw DEL or C1 control reaches a terminal from JSON or YAML.
			if bytes.ContainsAny(buf.Bytes(), "\x1b\x07\x7f\u009b\u0085") {
				t.Errorf("%s of %q holds a raw control character:\n%q", f, s, buf.String())
			}
		}
		var buf bytes.Buffer
		if err := Render(&buf, Table, in, func(w io.Writer) error { _, err := fmt.Fprintf(w, "vendor %s\n", s); return err }); err != nil {
			t.Fatal(err)
		}
		if r, bad := rawControl(buf.String(), true); bad {
			t.Errorf("table of %q holds %U: %q", s, r, buf.String())
		}
	}
	// Ordinary documents encode exactly as sigs.k8s.io/yaml does.
	in := doc{Vendor: "Dell Inc. Ünïcödé", Args: []string{"yes", "1.0", ""}}
	want, _ := yaml.Marshal(in)
	var buf bytes.Buffer
	Render(&buf, YAML, in, nil)
	if buf.String() != string(want) {
		t.Errorf("YAML differs from sigs.k8s.io/yaml:\n%s\nwant\n%s", buf.String(), want)
	}
}

// writeCounter records each Write it is given.
type writeCounter struct {
	writes []string
	err    error
}

func (c *writeCounter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.writes = append(c.writes, string(p))
	return len(p), nil
}

// TestRenderTableBuffered: a table written line by line reaches the
// writer in as few writes as the buffer allows, whole and escaped; what
// was written before the table failed still reaches it; and a write
// error (a closed stdout) is returned.
func TestRenderTableBuffered(t *testing.T) {
	lines := func(n int) func(io.Writer) error {
		return func(w io.Writer) error {
			for i := range n {
				fmt.Fprintf(w, "row %d \x07\n", i)
			}
			return nil
		}
	}
	for _, tc := range []struct {
		name string
		rows int
	}{
		{"one buffer", 100},
		{"several buffers", 3000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c writeCounter
			if err := Render(&c, Table, nil, lines(tc.rows)); err != nil {
				t.Fatal(err)
			}
			var want strings.Builder
			lines(tc.rows)(NewEscapeWriter(&want, false))
			if got := strings.Join(c.writes, ""); got != want.String() {
				t.Errorf("got %d bytes, want %d (unbuffered, escaped)", len(got), want.Len())
			}
			if most := (want.Len() + tableBuffer - 1) / tableBuffer; len(c.writes) > most {
				t.Errorf("%d writes of %d bytes, want at most %d", len(c.writes), want.Len(), most)
			}
		})
	}
	t.Run("table error", func(t *testing.T) {
		var c writeCounter
		bad := errors.New("half way")
		err := Render(&c, Table, nil, func(w io.Writer) error {
			fmt.Fprintln(w, "before")
			return bad
		})
		if !errors.Is(err, bad) || strings.Join(c.writes, "") != "before\n" {
			t.Errorf("error %v, written %q; want the table's error and its first line", err, c.writes)
		}
	})
	t.Run("closed output", func(t *testing.T) {
		c := writeCounter{err: syscall.EPIPE}
		if err := Render(&c, Table, nil, lines(3)); !errors.Is(err, syscall.EPIPE) {
			t.Errorf("error %v, want EPIPE", err)
		}
	})
}
