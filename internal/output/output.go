// Package output renders command results as a table, JSON or YAML, the
// three formats every berth command offers in the way kubectl does.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// Format is one of the output formats selected with -o.
type Format string

// The formats accepted by -o. Commands may accept more (for example nfd), but
// these three are understood by Render.
const (
	Table Format = "table"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// ParseFormat validates the value of -o against the formats a command accepts.
func ParseFormat(s string, allowed ...Format) (Format, error) {
	if len(allowed) == 0 {
		allowed = []Format{Table, JSON, YAML}
	}
	f := Format(strings.ToLower(strings.TrimSpace(s)))
	for _, a := range allowed {
		if f == a {
			return f, nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return "", fmt.Errorf("unknown output format %q: expected one of %s", s, strings.Join(names, ", "))
}

// Render writes v as JSON or YAML, or calls table for the human format.
// JSON is indented and ends with a newline so it diffs well in golden files.
func Render(w io.Writer, f Format, v any, table func(io.Writer) error) error {
	switch f {
	case JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case YAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	case Table, "":
		if table == nil {
			return fmt.Errorf("this command has no table output: use -o json or -o yaml")
		}
		return table(w)
	default:
		return fmt.Errorf("unknown output format %q", f)
	}
}

// ColorEnabled reports whether coloured output is allowed: only on a
// terminal, never when NO_COLOR is set (https://no-color.org) or --no-color
// was given.
func ColorEnabled(w io.Writer, noColorFlag bool, getenv func(string) string) bool {
	if noColorFlag || getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		return false
	}
	return fi.Mode()&os.ModeCharDevice != 0
}
