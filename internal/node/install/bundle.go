package install

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/manifest"
)

// A bundle is an uncompressed tar for air-gapped sites: the manifest as
// BundleManifest, then each component's file as sha256/<hex>. It is not
// compressed so that its members can be read in place, by offset.
const BundleManifest = "manifest.yaml"

// WriteBundle writes a bundle of manifestData and components cs to w,
// getting each file through f (so a bundle fills, and is filled from, the
// cache). It returns the bytes of component data written.
func WriteBundle(ctx context.Context, w io.Writer, manifestData []byte, cs []manifest.Component, f *fetch.Fetcher, tmp string) (int64, error) {
	tw := tar.NewWriter(w)
	mtime := time.Unix(0, 0).UTC()
	hdr := &tar.Header{Name: BundleManifest, Mode: 0o644, Size: int64(len(manifestData)), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return 0, err
	}
	if _, err := tw.Write(manifestData); err != nil {
		return 0, err
	}
	var total int64
	seen := map[string]bool{}
	for _, c := range cs {
		if seen[c.SHA256] {
			continue
		}
		seen[c.SHA256] = true
		dst := filepath.Join(tmp, c.SHA256)
		if _, err := f.Fetch(ctx, Item(c), dst); err != nil {
			return total, err
		}
		if err := appendFile(tw, "sha256/"+c.SHA256, dst, mtime); err != nil {
			os.Remove(dst)
			return total, fmt.Errorf("component %s: %w", c.Name, err)
		}
		os.Remove(dst)
		total += c.Size
	}
	return total, tw.Close()
}

func appendFile(tw *tar.Writer, name, p string, mtime time.Time) error {
	in, err := os.Open(p)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: fi.Size(), ModTime: mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}

// Bundle is an opened bundle: an index of its members by offset.
type Bundle struct {
	path    string
	members map[string]section
}

type section struct{ off, size int64 }

// offsetReader counts the bytes tar has consumed, so that after Next the
// count is the member data's offset; Seek lets tar skip data unread.
type offsetReader struct {
	f   *os.File
	off int64
}

func (r *offsetReader) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	r.off += int64(n)
	return n, err
}

func (r *offsetReader) Seek(off int64, whence int) (int64, error) {
	n, err := r.f.Seek(off, whence)
	if err == nil {
		r.off = n
	}
	return n, err
}

// OpenBundle indexes the bundle at p.
func OpenBundle(p string) (*Bundle, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	defer f.Close()
	b := &Bundle{path: p, members: map[string]section{}}
	or := &offsetReader{f: f}
	tr := tar.NewReader(or)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("bundle %s: not a berth bundle (an uncompressed tar): %w", p, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b.members[h.Name] = section{off: or.off, size: h.Size}
	}
	if _, ok := b.members[BundleManifest]; !ok {
		return nil, fmt.Errorf("bundle %s: no %s in it: not a berth bundle", p, BundleManifest)
	}
	return b, nil
}

// Manifest returns the bundle's manifest bytes.
func (b *Bundle) Manifest() ([]byte, error) {
	s := b.members[BundleManifest]
	if s.size > manifest.MaxSize {
		return nil, fmt.Errorf("bundle %s: manifest larger than %d bytes", b.path, manifest.MaxSize)
	}
	rc, err := b.open(s)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// Path is the bundle's file.
func (b *Bundle) Path() string { return b.path }

func (b *Bundle) open(s section) (io.ReadCloser, error) {
	f, err := os.Open(b.path)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.NewSectionReader(f, s.off, s.size), f}, nil
}

// Lookup implements fetch.Locator: bundles are looked up by digest.
func (b *Bundle) Lookup(it fetch.Item) []fetch.Candidate {
	s, ok := b.members["sha256/"+it.SHA256]
	if !ok {
		return nil
	}
	return []fetch.Candidate{{Name: b.path + "!sha256/" + it.SHA256, Open: func() (io.ReadCloser, error) { return b.open(s) }}}
}

// Locators turns --from arguments into locators: a directory is searched
// by digest and file name, a file must be a bundle. The bundles are also
// returned, for their manifests.
func Locators(from []string) ([]fetch.Locator, []*Bundle, error) {
	var ls []fetch.Locator
	var bs []*Bundle
	for _, p := range from {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, nil, fmt.Errorf("--from %s: %w", p, err)
		}
		if fi.IsDir() {
			ls = append(ls, fetch.Dir(p))
			continue
		}
		if !strings.HasSuffix(p, ".tar") && fi.Size() < 1024 {
			return nil, nil, errors.New("--from " + p + ": expected a directory or a bundle .tar made by berth bundle")
		}
		b, err := OpenBundle(p)
		if err != nil {
			return nil, nil, fmt.Errorf("--from: %w", err)
		}
		ls = append(ls, b)
		bs = append(bs, b)
	}
	return ls, bs, nil
}
