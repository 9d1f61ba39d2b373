package runtimecfg

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// maxFiles bounds how many files one load reads, so that an import cycle
// through globs or a huge drop-in directory cannot run away.
const maxFiles = 128

// Loaded is a runtime config as the runtime assembles it from its main file
// and the files it imports or loads from a drop-in directory.
type Loaded[T any] struct {
	// Config is the merged config; nil when the main file could not be read
	// or parsed.
	Config *T `json:"config"`
	// Files are the files read, main first, in merge order; paths are
	// relative to the file system given to the loader.
	Files []string `json:"files"`
	// Errors are the files that could not be read or parsed (*ParseError
	// for bad TOML); loading went on without them.
	Errors []error `json:"-"`
}

// FSPath turns a path as written in a config file (absolute on the host, or
// relative to the directory of the file that names it) into a path of the
// host-root file system. ok is false for a path that leaves the root.
func FSPath(fromFile, p string) (string, bool) {
	if strings.HasPrefix(p, "/") {
		p = path.Clean(p)[1:]
	} else {
		p = path.Join(path.Dir(fromFile), p)
	}
	if p == "" {
		p = "."
	}
	if !fs.ValidPath(p) {
		return "", false
	}
	return p, true
}

// LoadContainerd reads file from fsys and every file its `imports` match,
// breadth first as containerd does (each imported file's own imports are
// queued after it), then the extra drop-ins (k0s' containerd.d), merging
// in that order: later files override earlier ones.
func LoadContainerd(fsys fs.FS, file string, dropIns []string) Loaded[Containerd] {
	var out Loaded[Containerd]
	seen := map[string]bool{file: true}
	data, err := fs.ReadFile(fsys, file)
	if err != nil {
		out.Errors = append(out.Errors, fmt.Errorf("reading %s: %w", file, err))
		return out
	}
	main, err := ParseContainerd(file, data)
	if err != nil {
		out.Errors = append(out.Errors, err)
		return out
	}
	out.Files = append(out.Files, file)
	merged := main
	pending := out.importsOf(fsys, main, seen)
	for _, f := range dropIns {
		if !seen[f] {
			seen[f] = true
			pending = append(pending, f)
		}
	}
	for len(pending) > 0 && len(out.Files) < maxFiles {
		f := pending[0]
		pending = pending[1:]
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			out.Errors = append(out.Errors, fmt.Errorf("reading import %s: %w", f, err))
			continue
		}
		c, err := ParseContainerd(f, data)
		if err != nil {
			out.Errors = append(out.Errors, err)
			continue
		}
		out.Files = append(out.Files, f)
		merged = merged.Merge(c)
		pending = append(pending, out.importsOf(fsys, c, seen)...)
	}
	merged.Imports = main.Imports
	out.Config = merged
	return out
}

// importsOf expands the imports of c into files not seen yet, in order:
// each glob's matches sorted lexically, as filepath.Glob returns them.
func (l *Loaded[T]) importsOf(fsys fs.FS, c *Containerd, seen map[string]bool) []string {
	var out []string
	for _, imp := range c.Imports {
		p, ok := FSPath(c.File, imp)
		if !ok {
			l.Errors = append(l.Errors, fmt.Errorf("%s: import %q leaves the host root", c.File, imp))
			continue
		}
		matches := []string{p}
		if strings.ContainsAny(p, "*?[") {
			var err error
			matches, err = fs.Glob(fsys, p)
			if err != nil {
				l.Errors = append(l.Errors, fmt.Errorf("%s: import %q: %w", c.File, imp, err))
				continue
			}
		}
		for _, m := range matches {
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// LoadCRIO reads CRI-O's main config (optional: CRI-O has built-in
// defaults) and then every *.conf file of dropInDir in lexical order, as
// CRI-O does, merging later over earlier.
func LoadCRIO(fsys fs.FS, file, dropInDir string) Loaded[CRIO] {
	var out Loaded[CRIO]
	merged := &CRIO{File: file}
	if data, err := fs.ReadFile(fsys, file); err == nil {
		if c, err := ParseCRIO(file, data); err != nil {
			out.Errors = append(out.Errors, err)
		} else {
			merged = c
			out.Files = append(out.Files, file)
		}
	} else if !isNotExist(err) {
		out.Errors = append(out.Errors, fmt.Errorf("reading %s: %w", file, err))
	}
	if dropInDir != "" {
		matches, err := fs.Glob(fsys, path.Join(dropInDir, "*.conf"))
		if err != nil {
			out.Errors = append(out.Errors, fmt.Errorf("listing %s: %w", dropInDir, err))
		}
		for _, f := range matches {
			if len(out.Files) >= maxFiles {
				break
			}
			data, err := fs.ReadFile(fsys, f)
			if err != nil {
				out.Errors = append(out.Errors, fmt.Errorf("reading %s: %w", f, err))
				continue
			}
			c, err := ParseCRIO(f, data)
			if err != nil {
				out.Errors = append(out.Errors, err)
				continue
			}
			out.Files = append(out.Files, f)
			merged = merged.Merge(c)
		}
	}
	out.Config = merged
	return out
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
