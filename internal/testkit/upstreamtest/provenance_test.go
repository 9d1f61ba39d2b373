package upstreamtest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// provenanceFile lists every upstream file with where it comes from; it
// and the README that explains it are the only files it does not name.
const provenanceFile = "provenance.tsv"

// provenanceColumns is the header provenance.tsv must have, in order.
var provenanceColumns = []string{"file", "project", "version", "commit", "upstream_path", "license", "produced", "sha256"}

// provenanceEntry is one line of provenance.tsv.
type provenanceEntry struct {
	file, project, version, commit, upstreamPath, license, produced, sha256 string
}

// readProvenance parses provenance.tsv, rejecting what would let a file
// escape the check: an unknown header, a short line, an empty field, a
// path that leaves the folder, a malformed digest or a file named twice.
func readProvenance(r io.Reader) ([]provenanceEntry, error) {
	sc := bufio.NewScanner(r)
	var out []provenanceEntry
	seen := map[string]bool{}
	n := 0
	for sc.Scan() {
		n++
		f := strings.Split(sc.Text(), "\t")
		if n == 1 {
			if !slices.Equal(f, provenanceColumns) {
				return nil, fmt.Errorf("line 1: header %q, want %q", f, provenanceColumns)
			}
			continue
		}
		if len(f) != len(provenanceColumns) {
			return nil, fmt.Errorf("line %d: %d fields, want %d", n, len(f), len(provenanceColumns))
		}
		if i := slices.Index(f, ""); i >= 0 {
			return nil, fmt.Errorf("line %d: empty %s (write - when it does not apply)", n, provenanceColumns[i])
		}
		e := provenanceEntry{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7]}
		if path.Clean(e.file) != e.file || path.IsAbs(e.file) || strings.HasPrefix(e.file, "../") {
			return nil, fmt.Errorf("line %d: %q is not a clean path below the folder", n, e.file)
		}
		if b, err := hex.DecodeString(e.sha256); err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("line %d: %s: sha256 %q is not 64 hex digits", n, e.file, e.sha256)
		}
		if seen[e.file] {
			return nil, fmt.Errorf("line %d: %s is named twice", n, e.file)
		}
		seen[e.file] = true
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("empty: no header")
	}
	return out, nil
}

func TestReadProvenance(t *testing.T) {
	const header = "file\tproject\tversion\tcommit\tupstream_path\tlicense\tproduced\tsha256\n"
	sum := strings.Repeat("ab", 32)
	line := func(file, digest string) string {
		return file + "\tp\t1.0\tabc\tsrc/x\tApache-2.0\tcopied\t" + digest + "\n"
	}
	tests := []struct {
		name    string
		in      string
		want    []string // files
		wantErr string
	}{
		{"two files", header + line("a/x.toml", sum) + line("b", sum), []string{"a/x.toml", "b"}, ""},
		{"header only", header, nil, ""},
		{"empty", "", nil, "no header"},
		{"wrong header", "file\tsha256\n", nil, "header"},
		{"short line", header + "a\tp\n", nil, "2 fields"},
		{"empty field", header + "a\tp\t\tabc\tsrc/x\tApache-2.0\tcopied\t" + sum + "\n", nil, "empty version"},
		{"bad digest", header + line("a", "abc"), nil, "not 64 hex digits"},
		{"escaping path", header + line("../x", sum), nil, "not a clean path"},
		{"absolute path", header + line("/etc/x", sum), nil, "not a clean path"},
		{"unclean path", header + line("a//b", sum), nil, "not a clean path"},
		{"named twice", header + line("a", sum) + line("a", sum), nil, "named twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readProvenance(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var files []string
			for _, e := range got {
				files = append(files, e.file)
			}
			if !slices.Equal(files, tt.want) {
				t.Errorf("files %q, want %q", files, tt.want)
			}
		})
	}
}

// TestProvenance proves the upstream set complete and unaltered: every
// file provenance.tsv names is there with the recorded SHA-256, and every
// file there is named, so that a test cannot come to depend on a file
// whose origin and licence nobody wrote down.
func TestProvenance(t *testing.T) {
	dir := Dir(t)
	f, err := os.Open(filepath.Join(dir, provenanceFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := readProvenance(f)
	if err != nil {
		t.Fatalf("%s: %v", provenanceFile, err)
	}
	named := map[string]bool{provenanceFile: true, "README.md": true}
	for _, e := range entries {
		named[e.file] = true
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.file)))
		if err != nil {
			t.Errorf("%s names %s: %v", provenanceFile, e.file, err)
			continue
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(data)); got != e.sha256 {
			t.Errorf("%s: sha256 %s, %s records %s: upstream files are never edited", e.file, got, provenanceFile, e.sha256)
		}
	}
	var present int
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		present++
		if !named[filepath.ToSlash(rel)] {
			t.Errorf("%s is not named in %s: record its project, version, licence and origin", filepath.ToSlash(rel), provenanceFile)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Errorf("%s names no file", provenanceFile)
	}
	t.Logf("%d files named, %d present", len(entries), present)
}
