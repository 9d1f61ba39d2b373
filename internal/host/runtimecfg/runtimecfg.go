// Package runtimecfg reads the configuration files of the container
// runtimes berth configures: containerd's config.toml (versions 1 to 4, with
// its imports) and CRI-O's crio.conf with its drop-in directory.
//
// The parsers are pure: bytes in, struct out. They keep only what berth
// needs to reason about sandboxed runtimes (config version, imports, runtime
// handlers with their options, snapshotters) and ignore every other key, so
// that a config with settings berth does not know still reads. The loaders
// (LoadContainerd, LoadCRIO) add file-system traversal over an fs.FS so that
// the same merge semantics serve discovery and, later, the config writer.
package runtimecfg

import (
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/lazyre"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// ParseError is a config file that is not valid TOML or has a value of the
// wrong type. Line and Column are 1-based; zero when unknown.
type ParseError struct {
	File   string
	Line   int
	Column int
	// Key is the dotted key being decoded, when known.
	Key string
	// Msg says what was wrong and, where possible, what was expected.
	Msg string
}

// Error formats the error as file:line:column: message, the form editors
// and humans jump to.
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	if e.Key != "" {
		fmt.Fprintf(&b, "key %s: ", e.Key)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// decode unmarshals data into v and turns go-toml's errors into a
// ParseError that names file, line and column.
func decode(file string, data []byte, v any) error {
	if err := CheckBounds(file, data); err != nil {
		return err
	}
	err := toml.Unmarshal(data, v)
	if err == nil {
		return nil
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		return &ParseError{
			File: file, Line: line, Column: col,
			Key: dottedKey(de.Key()),
			Msg: friendlyMessage(strings.TrimPrefix(de.Error(), "toml: ")),
		}
	}
	return &ParseError{File: file, Msg: strings.TrimPrefix(err.Error(), "toml: ")}
}

// dottedKey writes a key as TOML would, quoting parts that contain dots
// (plugins."io.containerd.grpc.v1.cri".containerd).
func dottedKey(parts []string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		if strings.ContainsAny(p, ". \t\"'") || p == "" {
			p = strconv.Quote(p)
		}
		out[i] = p
	}
	return strings.Join(out, ".")
}

// typeMismatch matches go-toml's type errors, which name our private Go
// types; users need the TOML type that was expected instead.
var typeMismatch = lazyre.New(`^cannot decode TOML (.+?) into .*?(?:of type )?(\S+)$`)

// expectedTOML names the TOML type each Go field type takes.
var expectedTOML = map[string]string{
	"bool": "a boolean", "*bool": "a boolean",
	"string": "a string", "*string": "a string",
	"int64": "an integer", "*int64": "an integer",
	"[]string": "an array of strings", "*[]string": "an array of strings",
}

func friendlyMessage(msg string) string {
	m := typeMismatch.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	want, ok := expectedTOML[m[2]]
	if !ok {
		want = "a table"
		if !strings.HasPrefix(m[2], "map[") && !strings.Contains(m[2], "runtimecfg.") {
			return msg
		}
	}
	return fmt.Sprintf("expected %s, got a TOML %s", want, m[1])
}

// Handler is one runtime handler (a RuntimeClass handler) as configured:
// facts.Handler, the one type of what a runtime declares for a handler
// (name, runtime type and path, runtime root, ConfigPath, snapshotter, pod
// annotations, privileged_without_host_devices, source), with what a merge
// of config files needs besides.
type Handler struct {
	facts.Handler
	// Options is containerd's options table (ConfigPath, BinaryName,
	// SystemdCgroup, ...) as decoded; it stands in for facts.Handler's
	// Options, their text (Facts).
	Options map[string]any `json:"options,omitempty"`
	// Keys are the handler keys the file set, sorted, so that a merge can
	// tell an explicit false or empty value from an absent one.
	Keys []string `json:"keys,omitempty"`
}

// Facts is h as discovery reports it: the options as text, without
// ConfigPath, which facts.Handler holds in a field of its own.
func (h Handler) Facts() facts.Handler {
	fh := h.Handler
	fh.Options = nil
	for k, v := range h.Options {
		if k == "ConfigPath" {
			continue
		}
		if fh.Options == nil {
			fh.Options = map[string]string{}
		}
		fh.Options[k] = fmt.Sprint(v)
	}
	return fh
}

// has reports whether the file set key.
func (h Handler) has(key string) bool { return slices.Contains(h.Keys, key) }

// setKey copies the value of a key the file set (p non-nil) to dst and
// records the key in h.Keys; an absent key leaves both alone, which is what
// lets a merge tell an explicit zero value from no value.
func setKey[T any](h *Handler, key string, p *T, dst *T) {
	if p != nil {
		*dst = *p
		h.Keys = append(h.Keys, key)
	}
}

// mergeHandler applies over to base with containerd's (and CRI-O's) merge
// semantics: every key the overlay set replaces the base's value; options
// merge key by key.
func mergeHandler(base, over Handler) Handler {
	out := base
	set := func(key string, apply func()) {
		if over.has(key) {
			apply()
		}
	}
	set("runtime_type", func() { out.RuntimeType = over.RuntimeType })
	set("runtime_path", func() { out.RuntimePath = over.RuntimePath })
	set("runtime_root", func() { out.RuntimeRoot = over.RuntimeRoot })
	set("runtime_config_path", func() { out.ConfigPath = over.ConfigPath })
	set("snapshotter", func() { out.Snapshotter = over.Snapshotter })
	set("pod_annotations", func() { out.PodAnnotations = over.PodAnnotations })
	set("allowed_annotations", func() { out.PodAnnotations = over.PodAnnotations })
	set("privileged_without_host_devices", func() { out.PrivilegedWithoutHostDevices = over.PrivilegedWithoutHostDevices })
	if over.has("options") {
		opts := make(map[string]any, len(base.Options)+len(over.Options))
		for k, v := range base.Options {
			opts[k] = v
		}
		for k, v := range over.Options {
			opts[k] = v
		}
		out.Options = opts
		if s, ok := opts["ConfigPath"].(string); ok {
			out.ConfigPath = s
		}
	}
	keys := append(slices.Clone(base.Keys), over.Keys...)
	slices.Sort(keys)
	out.Keys = slices.Compact(keys)
	if len(over.Keys) > 0 {
		out.Source = over.Source
	}
	return out
}

// mergeHandlers merges over into base by handler name and returns the
// result sorted by name.
func mergeHandlers(base, over []Handler) []Handler {
	byName := make(map[string]Handler, len(base)+len(over))
	for _, h := range base {
		byName[h.Name] = h
	}
	for _, h := range over {
		if b, ok := byName[h.Name]; ok {
			byName[h.Name] = mergeHandler(b, h)
		} else {
			byName[h.Name] = h
		}
	}
	out := make([]Handler, 0, len(byName))
	for _, h := range byName {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b Handler) int { return strings.Compare(a.Name, b.Name) })
	return out
}
