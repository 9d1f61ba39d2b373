package output

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
)

// failAfter accepts n bytes, then fails every write with err.
type failAfter struct {
	n   int
	err error
	buf bytes.Buffer
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.buf.Len()+len(p) > f.n {
		k := f.n - f.buf.Len()
		f.buf.Write(p[:k])
		return k, f.err
	}
	return f.buf.Write(p)
}

// TestChecked: the first failed write is kept, and nothing is written
// after it (no gap in the output); a short write without an error counts
// as one.
func TestChecked(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w     io.Writer
		want  error
		wrote string
	}{
		{"all written", &failAfter{n: 100}, nil, "one\ntwo\n"},
		{"disk full", &failAfter{n: 5, err: syscall.ENOSPC}, syscall.ENOSPC, "one\nt"},
		{"closed pipe", &failAfter{n: 0, err: syscall.EPIPE}, syscall.EPIPE, ""},
		{"short write", shortWriter{}, io.ErrShortWrite, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewChecked(tc.w)
			fmt.Fprint(c, "one\n")
			fmt.Fprint(c, "two\n")
			if err := c.Err(); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("Err() = %v, want %v", err, tc.want)
			}
			if f, ok := tc.w.(*failAfter); ok && f.buf.String() != tc.wrote {
				t.Errorf("wrote %q, want %q", f.buf.String(), tc.wrote)
			}
			if Underlying(c) != tc.w || Underlying(tc.w) != tc.w {
				t.Error("Underlying does not unwrap")
			}
		})
	}
}

// shortWriter writes nothing and says no error.
type shortWriter struct{}

func (shortWriter) Write([]byte) (int, error) { return 0, nil }
