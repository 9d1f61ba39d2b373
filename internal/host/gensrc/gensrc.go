// Package gensrc writes what berth's code generators (`go generate`:
// jsongen, katagen) produce. A generated file is read by the build and by
// an up-to-date test, so a failed or interrupted run must leave the old
// file whole, never half a new one.
package gensrc

import (
	"fmt"
	"os"
	"path/filepath"
)

// Emit writes src to the file out, or to standard output when out is "-".
func Emit(out string, src []byte) error {
	if out == "-" {
		_, err := os.Stdout.Write(src)
		return err
	}
	return WriteFile(out, src)
}

// WriteFile replaces name whole: data is written to a temporary file
// beside it, which is then renamed over it.
func WriteFile(name string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".gensrc-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
