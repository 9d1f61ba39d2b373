package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/var/lib/kubelet", "/var/lib/kubelet"},
		{`/mnt/with\040space`, "/mnt/with space"},
		{`/a\011tab\012nl\134bs`, "/a\ttab\nnl\\bs"},
		{`/not\09octal`, `/not\09octal`},
		{`/short\04`, `/short\04`},
	} {
		if got := Unescape(tc.in); got != tc.want {
			t.Errorf("Unescape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
