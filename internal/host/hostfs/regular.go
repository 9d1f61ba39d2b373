package hostfs

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// OpenRegular opens path, a file on this machine that the user named (a
// boot component to measure, a manifest, a snapshot), for reading. Only a
// regular file of at most limit bytes is opened (limit <= 0: no cap):
// path is stat'ed first and anything else is refused unopened (opening a
// FIFO blocks until a writer comes, reading /dev/zero never ends). The
// open itself is non-blocking and the descriptor is checked again, so a
// file swapped for a FIFO or device in between is refused too. Errors are
// *fs.PathError wrapping a *NotRegularError (ErrNotRegular) or a
// *TooLargeError (ErrTooLarge). The file may still grow after the check:
// a reader that must stay bounded reads through LimitedReader.
func OpenRegular(path string, limit int64) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkRegular(path, st, limit); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	if st, err = f.Stat(); err == nil {
		err = checkRegular(path, st, limit)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkRegular(path string, st fs.FileInfo, limit int64) error {
	if !st.Mode().IsRegular() {
		k := "directory"
		if !st.IsDir() {
			k = kindOf(fileFormat(st.Mode()))
		}
		return &fs.PathError{Op: "open", Path: path, Err: &NotRegularError{Kind: k}}
	}
	if limit > 0 && st.Size() > limit {
		return &fs.PathError{Op: "open", Path: path, Err: &TooLargeError{Limit: limit}}
	}
	return nil
}

// LimitedReader reads r but fails with a *TooLargeError (ErrTooLarge)
// once it has given more than limit bytes: a file that grew after
// OpenRegular checked its size is refused instead of read without end.
func LimitedReader(r io.Reader, limit int64) io.Reader {
	return &limited{r: io.LimitReader(r, limit+1), limit: limit}
}

type limited struct {
	r     io.Reader
	n     int64
	limit int64
}

func (l *limited) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.limit {
		return n, &TooLargeError{Limit: l.limit}
	}
	return n, err
}
