package discover

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// cdiSpecDirs are the directories containerd (cdi_spec_dirs, whose
// default `containerd config default` prints for 1.7 and 2.x) and CRI-O
// read CDI specifications from; NVIDIA's sandbox device plugin writes
// its nvidia.com-pgpu.yaml to the second (NVIDIA/sandbox-device-plugin,
// pkg/device_plugin/constants.go: cdiRoot).
var cdiSpecDirs = [...]string{"etc/cdi", "var/run/cdi"}

// maxCDISpec bounds one spec file. NVIDIA's specs are a few kilobytes
// (the sandbox device plugin's lists /dev/vfio nodes) to tens of
// kilobytes (nvidia-ctk's, with every driver library as a mount).
const maxCDISpec = 1 << 20

// cdiSpecs lists the CDI specification files of the root with the kind
// each declares. A directory that does not exist holds no specs; one that
// cannot be listed makes cdiSpecs unknown.
func cdiSpecs(s *session) []facts.CDISpec {
	var out []facts.CDISpec
	for _, dir := range cdiSpecDirs {
		ents, err := s.root.FS().ReadDir(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			s.unknownf("cdiSpecs", "%s", ReadReason(dir, err))
			continue
		}
		for _, e := range ents {
			name := e.Name()
			if e.IsDir() || !(strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".yaml")) {
				// CDI reads only these two suffixes.
				continue
			}
			p := path.Join(dir, name)
			spec := facts.CDISpec{Path: "/" + p}
			b, err := hostfs.ReadFileLimit(s.root.FS(), p, maxCDISpec)
			if err != nil {
				spec.Error = ReadReason("/"+p, err)
			} else if spec.Kind, _, err = parseCDISpec(b); err != nil {
				spec.Error = unparseable("/"+p, 0, err.Error())
			}
			out = append(out, spec)
		}
	}
	return out
}

// parseCDISpec returns the kind and cdiVersion a CDI specification
// declares. A JSON spec (the first byte '{') is decoded as JSON; a YAML
// one is read line by line for the top-level keys, which in block YAML
// start in column 0 (a block scalar's lines are indented), so nothing
// else of the file is parsed.
func parseCDISpec(b []byte) (kind, version string, err error) {
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) > 0 && t[0] == '{' {
		var doc struct {
			Kind    *string `json:"kind"`
			Version string  `json:"cdiVersion"`
		}
		if err := json.Unmarshal(t, &doc); err != nil {
			return "", "", fmt.Errorf("JSON: %w", err)
		}
		if doc.Kind == nil {
			return "", "", errors.New(`no "kind": want "vendor/class" (nvidia.com/pgpu)`)
		}
		if !validCDIKind(*doc.Kind) {
			return "", "", fmt.Errorf(`"kind" %q: want "vendor/class" (nvidia.com/pgpu)`, *doc.Kind)
		}
		return *doc.Kind, doc.Version, nil
	}
	kindLine := 0
	n, seen := 0, false
	for line := range strings.Lines(string(b)) {
		n++
		line = strings.TrimRight(line, "\r\n")
		if line == "" || line[0] == ' ' || line[0] == '\t' || line[0] == '#' || line[0] == '-' && !strings.HasPrefix(line, "---") {
			if line != "" && line[0] != '#' {
				seen = true
			}
			continue
		}
		if strings.HasPrefix(line, "---") || strings.HasPrefix(line, "...") {
			if seen {
				// CDI reads one document per file.
				break
			}
			continue
		}
		seen = true
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return "", "", fmt.Errorf("line %d: %q is not a key: value", n, truncate(line, 60))
		}
		v = yamlScalar(v)
		switch yamlScalar(k) {
		case "kind":
			if kindLine != 0 {
				return "", "", fmt.Errorf("line %d: kind again (first on line %d)", n, kindLine)
			}
			if !validCDIKind(v) {
				return "", "", fmt.Errorf("line %d: kind %q: want vendor/class (nvidia.com/pgpu)", n, truncate(v, 60))
			}
			kind, kindLine = v, n
		case "cdiVersion":
			version = v
		}
	}
	if kind == "" {
		return "", "", errors.New("no top-level kind: want kind: vendor/class (nvidia.com/pgpu)")
	}
	return kind, version, nil
}

// yamlScalar returns a plain or quoted YAML scalar without its quotes and
// a trailing comment.
func yamlScalar(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') {
		if i := strings.IndexByte(v[1:], v[0]); i >= 0 {
			return v[1 : i+1]
		}
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return v
}

// validCDIKind reports whether k is a CDI kind, "vendor/class": the
// vendor a domain-like name (letters, digits, '-' and '.'), the class
// letters, digits, '-' and '_', each starting with a letter and ending
// with a letter or digit (the CDI specification, SPEC.md, "kind").
func validCDIKind(k string) bool {
	vendor, class, ok := strings.Cut(k, "/")
	return ok && cdiName(vendor, ".-") && cdiName(class, "-_")
}

// cdiName checks one part of a kind; extra are the allowed punctuation.
func cdiName(s, extra string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i, r := range s {
		letter := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		digit := r >= '0' && r <= '9'
		switch {
		case i == 0 && !letter:
			return false
		case i == len(s)-1 && !letter && !digit:
			return false
		case !letter && !digit && !strings.ContainsRune(extra, r):
			return false
		}
	}
	return true
}
