package report

import (
	"strings"
	"testing"
)

func TestWrap(t *testing.T) {
	red := func(s string) string { return "\x1b[31m" + s + "\x1b[0m" }
	long := strings.Repeat("x", Width+5)
	for _, tc := range []struct {
		name, first, indent, text, want string
	}{
		{"fits", "  a: ", "    ", "one two three", "  a: one two three\n"},
		{"no text", "  a: ", "    ", "", "  a: \n"},
		{"no text, first is the indent", "    ", "    ", " \t ", ""},
		{"spaces collapse", "", "", "  one \t two\nthree  ", "one two three\n"},
		{"breaks at Width", "", "  ", strings.Repeat("abcd ", 20),
			strings.TrimSuffix(strings.Repeat("abcd ", 16), " ") + "\n  " + strings.TrimSuffix(strings.Repeat("abcd ", 4), " ") + "\n"},
		{"colours take no width", "", "  ", strings.Repeat(red("abcd")+" ", 16),
			strings.TrimSuffix(strings.Repeat(red("abcd")+" ", 16), " ") + "\n"},
		{"a word longer than a line has one of its own", "- ", "  ", "a " + long + " b", "- a\n  " + long + "\n  b\n"},
		{"first longer than a line", long + " ", "  ", "a", long + " a\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			wrap(&b, tc.first, tc.indent, tc.text)
			if b.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
			for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
				if visibleLen(l) > Width && !strings.Contains(l, long) {
					t.Errorf("line of %d columns: %q", visibleLen(l), l)
				}
			}
		})
	}
}
