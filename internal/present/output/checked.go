package output

import (
	"io"
	"sync"
)

// Checked is a writer that remembers its first error: a command's stdout,
// so that a result written with fmt.Fprintf, whose error nobody reads,
// still fails the run when it was not written (berth config render >
// /dev/full). After the first error every Write fails with it, so that
// nothing is written past a gap.
type Checked struct {
	w   io.Writer
	mu  sync.Mutex
	err error
}

// NewChecked wraps w.
func NewChecked(w io.Writer) *Checked { return &Checked{w: w} }

// Write writes p to the underlying writer unless an earlier write failed.
func (c *Checked) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	c.err = err
	return n, err
}

// Err is the first write error, nil when every write succeeded.
func (c *Checked) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Underlying is the writer Checked wraps: what a terminal test or a
// process's own stdout must be compared with.
func (c *Checked) Underlying() io.Writer { return c.w }

// Underlying returns the writer w wraps when it is a Checked, else w.
func Underlying(w io.Writer) io.Writer {
	if c, ok := w.(*Checked); ok {
		return c.w
	}
	return w
}
