package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"berth.dev/berth/internal/host/facts"
)

// FeaturesDir is where host owners put feature files, relative to the root.
const FeaturesDir = "etc/berth/features.d"

// MaxFeatureFile is the largest feature file read (as Node Feature
// Discovery's feature files).
const MaxFeatureFile = 64 << 10

// maxLineErrors bounds how many bad lines of one file are reported.
const maxLineErrors = 5

// expiryDirective is the comment that makes a file stop counting after a
// time, as in Node Feature Discovery.
const expiryDirective = "+expiry-time="

// FeatureFile is one parsed feature file.
type FeatureFile struct {
	// Features maps keys to values; a key given alone means "true".
	Features map[string]string
	// Keys are the keys in the order they first appeared.
	Keys []string
	// Expiry is the +expiry-time directive; zero when there is none.
	Expiry time.Time
}

// ParseFeatures parses a feature file: either lines of `key` or
// `key=value`, or one JSON object of string, number or boolean values.
// Lines starting with # are comments; `# +expiry-time=<RFC 3339>` sets the
// file's expiry (any other `# +` directive is an error, so that a typo does
// not silently keep a file alive). Errors name the line.
func ParseFeatures(data []byte) (FeatureFile, error) {
	ff := FeatureFile{Features: map[string]string{}}
	var errs []error
	fail := func(line int, format string, args ...any) {
		if len(errs) < maxLineErrors {
			errs = append(errs, fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...)))
		}
	}
	set := func(line int, k, v string) {
		if err := ValidateKey(k); err != nil {
			fail(line, "%v", err)
			return
		}
		if err := ValidateValue(v); err != nil {
			fail(line, "key %s: %v", k, err)
			return
		}
		if _, seen := ff.Features[k]; !seen {
			ff.Keys = append(ff.Keys, k)
		}
		ff.Features[k] = v
	}
	rest := data
	for lineNo := 1; len(rest) > 0; lineNo++ {
		start := len(data) - len(rest)
		var raw []byte
		raw, rest, _ = bytes.Cut(rest, []byte("\n"))
		line := strings.TrimSpace(string(raw))
		switch {
		case line == "":
		case strings.HasPrefix(line, "#"):
			c := strings.TrimSpace(line[1:])
			if !strings.HasPrefix(c, "+") {
				continue
			}
			v, ok := strings.CutPrefix(c, expiryDirective)
			if !ok {
				fail(lineNo, "unknown directive %q, expected %s<RFC 3339 time>", clip(line), expiryDirective)
				continue
			}
			t, err := time.Parse(time.RFC3339, strings.TrimSpace(v))
			switch {
			case err != nil:
				fail(lineNo, "expiry time %q: expected RFC 3339 such as 2026-12-31T00:00:00Z", clip(v))
			case !ff.Expiry.IsZero():
				fail(lineNo, "second expiry-time directive")
			default:
				ff.Expiry = t
			}
		case strings.HasPrefix(line, "{") && len(ff.Keys) == 0:
			// The remainder of the file from this line is one JSON object.
			parseJSONFeatures(data, start, lineNo, set, fail)
			rest = nil
		default:
			k, v, _ := strings.Cut(line, "=")
			if !strings.Contains(line, "=") {
				v = "true"
			}
			set(lineNo, strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	if len(errs) > 0 {
		return FeatureFile{}, errors.Join(errs...)
	}
	return ff, nil
}

// parseJSONFeatures decodes data[off:] as one flat JSON object.
func parseJSONFeatures(data []byte, off, firstLine int, set func(int, string, string), fail func(int, string, ...any)) {
	lineAt := func(o int64) int { return 1 + bytes.Count(data[:min(int(o), len(data))], []byte("\n")) }
	dec := json.NewDecoder(bytes.NewReader(data[off:]))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		o := int64(off) + dec.InputOffset()
		var se *json.SyntaxError
		if errors.As(err, &se) {
			o = int64(off) + se.Offset
		}
		fail(lineAt(o), "invalid JSON at byte offset %d: %v", o, err)
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		o := int64(off) + dec.InputOffset()
		fail(lineAt(o), "unexpected data after the JSON object at byte offset %d", o)
		return
	}
	for k, v := range sortedKeys(obj) {
		switch v := v.(type) {
		case string:
			set(firstLine, k, v)
		case json.Number:
			set(firstLine, k, v.String())
		case bool:
			set(firstLine, k, fmt.Sprint(v))
		default:
			fail(firstLine, "key %s: value must be a string, number or boolean", clip(k))
		}
	}
}

// Features is what the feature files of a root contributed.
type Features struct {
	Features map[string]string
	Sources  map[string]string
	Errors   []facts.PluginError
	Notes    []facts.PluginError
}

// LoadFeatures reads every feature file in dir of fsys in lexical order
// (later files override earlier ones). Hidden files and editor backups
// ("~") are skipped; a file that is not regular (a symlink, which could
// point outside an offline root, or a directory), is larger than
// MaxFeatureFile or has a bad line is reported as an error and contributes
// nothing; an expired file is ignored with a note. A missing dir is not an
// error.
func LoadFeatures(fsys fs.FS, dir string, now time.Time) Features {
	var out Features
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			out.Errors = append(out.Errors, facts.PluginError{Name: path.Base(dir), Message: fmt.Sprintf("reading %s: %v", dir, err)})
		}
		return out
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") {
			continue
		}
		p := path.Join(dir, name)
		ff, err := readFeatureFile(fsys, p, e)
		if err != nil {
			out.Errors = append(out.Errors, facts.PluginError{Name: name, Message: fmt.Sprintf("feature file %s: %v", p, err)})
			continue
		}
		if !ff.Expiry.IsZero() && !now.Before(ff.Expiry) {
			out.Notes = append(out.Notes, facts.PluginError{Name: name, Message: fmt.Sprintf("feature file %s expired at %s: ignored", p, ff.Expiry.Format(time.RFC3339))})
			continue
		}
		for _, k := range ff.Keys {
			if out.Features == nil {
				out.Features, out.Sources = map[string]string{}, map[string]string{}
			}
			out.Features[k], out.Sources[k] = ff.Features[k], p
		}
	}
	return out
}

func readFeatureFile(fsys fs.FS, p string, e fs.DirEntry) (FeatureFile, error) {
	if !e.Type().IsRegular() {
		return FeatureFile{}, fmt.Errorf("not a regular file (%s); feature files must be plain files, not symlinks or directories", e.Type())
	}
	f, err := fsys.Open(p)
	if err != nil {
		return FeatureFile{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFeatureFile+1))
	if err != nil {
		return FeatureFile{}, err
	}
	if len(b) > MaxFeatureFile {
		return FeatureFile{}, fmt.Errorf("larger than %d KiB", MaxFeatureFile>>10)
	}
	return ParseFeatures(b)
}
