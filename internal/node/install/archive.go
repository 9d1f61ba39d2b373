package install

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"

	"berth.dev/berth/internal/node/manifest"
)

// memberKey is how member names are compared: without a leading "./".
func memberKey(n string) string { return path.Clean(strings.TrimPrefix(n, "./")) }

// Extract extracts the listed members of archive component c (already
// verified at archivePath) into dir with their modes. Writes go through
// os.Root, so no member path or symlink in dir can reach outside it; a
// listed member that is not a regular file, or is missing, is an error.
func Extract(ctx context.Context, archivePath string, c manifest.Component, dir string) error {
	src, err := os.OpenRoot(filepath.Dir(archivePath))
	if err != nil {
		return fmt.Errorf("component %s: %w", c.Name, err)
	}
	defer src.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	_, err = extractFrom(ctx, src, filepath.Base(archivePath), c, root)
	return err
}

// extractFrom extracts archive component c, the file name in src, into
// root, and returns the files it wrote with their digests.
func extractFrom(ctx context.Context, src *os.Root, name string, c manifest.Component, root *os.Root) ([]RecordFile, error) {
	if c.Archive == nil {
		return nil, fmt.Errorf("component %s is not an archive", c.Name)
	}
	f, err := src.Open(name)
	if err != nil {
		return nil, fmt.Errorf("component %s: %w", c.Name, err)
	}
	defer f.Close()
	var r io.Reader = f
	switch c.Archive.Type {
	case "tar":
	case "tar.gz":
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("component %s: %s: %w", c.Name, c.Archive.Type, err)
		}
		defer gz.Close()
		r = gz
	case "tar.zst":
		zr, err := zstd.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("component %s: %s: %w", c.Name, c.Archive.Type, err)
		}
		defer zr.Close()
		r = zr
	default:
		return nil, fmt.Errorf("component %s: archive type %q: expected tar, tar.gz or tar.zst", c.Name, c.Archive.Type)
	}
	want := map[string]manifest.Member{}
	for _, m := range c.Archive.Members {
		if !filepath.IsLocal(m.Path) {
			return nil, fmt.Errorf("component %s: member %s: install path %q escapes the prefix", c.Name, m.Name, m.Path)
		}
		want[memberKey(m.Name)] = m
	}
	var files []RecordFile
	tr := tar.NewReader(r)
	for len(want) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("component %s: reading %s archive: %w", c.Name, c.Archive.Type, err)
		}
		m, ok := want[memberKey(h.Name)]
		if !ok {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("component %s: member %s is not a regular file (tar type %q): refusing it", c.Name, h.Name, h.Typeflag)
		}
		delete(want, memberKey(h.Name))
		rf, err := writeMember(root, m, tr)
		if err != nil {
			return nil, fmt.Errorf("component %s: member %s: %w", c.Name, h.Name, err)
		}
		files = append(files, rf)
	}
	if len(want) > 0 {
		var missing []string
		for _, m := range c.Archive.Members {
			if _, ok := want[memberKey(m.Name)]; ok {
				missing = append(missing, m.Name)
			}
		}
		return nil, fmt.Errorf("component %s: the archive lacks members %s", c.Name, strings.Join(missing, ", "))
	}
	// In the manifest's order, whatever the archive's.
	order := map[string]int{}
	for i, m := range c.Archive.Members {
		order[m.Path] = i
	}
	slices.SortFunc(files, func(a, b RecordFile) int { return order[a.Path] - order[b.Path] })
	return files, nil
}

func writeMember(root *os.Root, m manifest.Member, r io.Reader) (RecordFile, error) {
	rf := RecordFile{Path: m.Path}
	if err := root.MkdirAll(path.Dir(m.Path), 0o755); err != nil {
		return rf, err
	}
	mode := manifest.FileMode(m.Mode)
	rf.Mode = fmt.Sprintf("%04o", mode.Perm())
	out, err := root.OpenFile(m.Path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return rf, err
	}
	h := sha256.New()
	rf.Size, err = io.Copy(io.MultiWriter(out, h), r)
	rf.SHA256 = hex.EncodeToString(h.Sum(nil))
	if err == nil {
		err = out.Chmod(mode)
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rf, errors.Join(err, root.Remove(m.Path))
	}
	return rf, nil
}
