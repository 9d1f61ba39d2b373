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
	for _, f := range r.Host {
		pf := PreviewFile{Path: f.Path, Kind: f.Kind, Purpose: f.Purpose, Content: f.Content}
		cur, err := fs.ReadFile(fsys, f.Path)
		switch {
		case err == nil:
			pf.Exists = true
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("reading %s: %w", f.Path, err)
		}
		if f.Kind == Block {
			if skipImports(f, f.Path, cur, pf.Exists) {
				continue
			}
			base := cur
			if !pf.Exists {
				if f.Base == nil {
					return nil, fmt.Errorf("%s does not exist: berth extends the %s but does not create it", f.Path, f.Purpose)
				}
				base = f.Base
			} else if err := validate(f, f.Path, cur); err != nil {
				return nil, fmt.Errorf("refusing to change %s, which does not parse: %w", f.Path, err)
			}
			if pf.Content, err = MergeBlock(f.Path, base, f.BlockID, f.Content, f.Where); err != nil {
				return nil, err
			}
		}
		out = append(out, pf)
	}
	return out, nil
}
