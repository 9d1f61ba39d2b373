package fetch

import (
	"context"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Candidate is a local file that may hold an item's bytes; it is verified
// while it is copied.
type Candidate struct {
	// Name is the path (or bundle!member) for messages.
	Name string
	// Open opens it for reading.
	Open func() (io.ReadCloser, error)
}

// Locator offers local candidates for an item, best first.
type Locator interface {
	Lookup(it Item) []Candidate
}

// Dir is a --from directory: a file named by the item's digest, then by
// each of its names.
type Dir string

// Lookup implements Locator.
func (d Dir) Lookup(it Item) []Candidate {
	var out []Candidate
	seen := map[string]bool{}
	for _, n := range append([]string{it.SHA256, filepath.Join("sha256", it.SHA256)}, it.Names...) {
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		p := filepath.Join(string(d), n)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			out = append(out, fileCandidate(p))
		}
	}
	return out
}

func fileCandidate(p string) Candidate {
	return Candidate{Name: p, Open: func() (io.ReadCloser, error) { return os.Open(p) }}
}

// chunk is the unit CopyHash hands between its reader and writer.
const chunk = 1 << 20

// CopyHash copies src to dst and feeds every byte to h. Reading and hashing
// run in the calling goroutine while a second one writes the previous
// chunk, so on two cores the copy costs little more than the hash: this is
// the verify-and-install path, and hashing is its bound.
func CopyHash(ctx context.Context, dst io.Writer, src io.Reader, h hash.Hash) (int64, error) {
	type block struct {
		buf []byte
		n   int
	}
	const depth = 4
	free := make(chan []byte, depth)
	for range depth {
		free <- make([]byte, chunk)
	}
	full := make(chan block, depth)
	var werr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for b := range full {
			if werr == nil {
				_, werr = dst.Write(b.buf[:b.n])
			}
			free <- b.buf
		}
	}()
	var total int64
	var rerr error
	for {
		if err := ctx.Err(); err != nil {
			rerr = err
			break
		}
		buf := <-free
		n, err := io.ReadFull(src, buf)
		if n > 0 {
			h.Write(buf[:n])
			total += int64(n)
			full <- block{buf, n}
		} else {
			free <- buf
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	close(full)
	wg.Wait()
	if rerr != nil {
		return total, rerr
	}
	return total, werr
}
