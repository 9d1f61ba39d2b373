package configure

import (
	"errors"
	"fmt"
	"io/fs"
)

// PreviewFile is a host file as apply would leave it.
type PreviewFile struct {
	Path    string `json:"path"`
	Kind    Kind   `json:"kind"`
	Purpose string `json:"purpose"`
	// Exists says whether the file is on the node already (a block is
	// then merged into it).
	Exists  bool   `json:"exists"`
	Content []byte `json:"-"`
}

// Preview returns every host file of r as apply would leave it on the
// read-only host root fsys, without writing anything: blocks are merged
// into the node's current files, which must parse.
func Preview(fsys fs.FS, r *Rendered) ([]PreviewFile, error) {
	var out []PreviewFile
	at := map[string]int{} // a file with several blocks is shown once, complete
	for _, f := range r.Host {
		pf := PreviewFile{Path: f.Path, Kind: f.Kind, Purpose: f.Purpose}
		cur, err := fs.ReadFile(fsys, f.Path)
		switch {
		case err == nil:
			pf.Exists = true
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("reading %s: %w", f.Path, err)
		}
		i, seen := at[f.Path]
		if seen {
			cur, pf.Exists = out[i].Content, true
		}
		next, skip, err := nextContent(f, f.Path, cur, pf.Exists)
		if err != nil {
			return nil, err
		}
		if skip {
			continue
		}
		pf.Content = next
		if seen {
			out[i].Content = next
			continue
		}
		at[f.Path] = len(out)
		out = append(out, pf)
	}
	return out, nil
}
