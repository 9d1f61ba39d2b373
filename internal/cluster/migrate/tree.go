package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"berth.dev/berth/internal/host/decodeerr"
	"berth.dev/berth/internal/host/errdefs"
)

// node is one value of a values file, with where it was set: a mapping
// (kids, in the file's order) or a leaf (a scalar, a list, null, or a
// mapping read whole because it is one knob, such as a nodeSelector).
type node struct {
	kids  map[string]*node
	order []string
	v     any
	file  string
	line  int
}

func (n *node) mapping() bool { return n.kids != nil }

// opaque are the knobs whose value is a mapping taken whole: label sets,
// Kubernetes objects and user-named entries, which Helm merges key by key
// but which mean one setting each.
var opaque = [...]string{
	"nodeSelector", "podLabels", "podAnnotations", "affinity", "resources",
	"updateStrategy", "job.dispatcherNodeSelector", "job.cleanup",
	"monitor.resources", "monitor.securityContext", "customRuntimes.runtimes",
	"shims.*.runtimeClass.nodeSelector", "shims.*.runtimeClass.overhead",
}

// maxFile bounds a values file: kata-deploy's own is 26 KiB.
const maxFile = 4 << 20

// parse reads one values file. Errors are usage errors that name the file
// and line but never quote its text (decodeerr).
func parse(name string, data []byte) (*node, error) {
	if len(data) > maxFile {
		return nil, errdefs.Usagef("%s: larger than %d bytes: not a Helm values file", name, maxFile)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	root := &node{kids: map[string]*node{}, file: name, line: 1}
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return root, nil
		}
		return nil, errdefs.Usagef("%s: not YAML: %s", name, decodeerr.Error(err))
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, errdefs.Usagef("%s:%d: a second YAML document: a values file is one mapping", name, more.Line)
	} else if !errors.Is(err, io.EOF) {
		return nil, errdefs.Usagef("%s: not YAML: %s", name, decodeerr.Error(err))
	}
	if len(doc.Content) == 0 {
		return root, nil
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return root, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, errdefs.Usagef("%s:%d: the top level is not a mapping of values", name, top.Line)
	}
	return convert(top, "", name)
}

// convert turns a YAML node at path into a node, reading opaque knobs,
// scalars and lists whole.
func convert(y *yaml.Node, path, file string) (*node, error) {
	for y.Kind == yaml.AliasNode {
		y = y.Alias
	}
	if y.Kind != yaml.MappingNode || isOpaque(path) {
		var v any
		if err := y.Decode(&v); err != nil {
			return nil, errdefs.Usagef("%s:%d: %s: %s", file, y.Line, fieldOr(path), decodeerr.Error(err))
		}
		return &node{v: v, file: file, line: y.Line}, nil
	}
	n := &node{kids: map[string]*node{}, file: file, line: y.Line}
	for i := 0; i+1 < len(y.Content); i += 2 {
		k, val := y.Content[i], y.Content[i+1]
		if k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "") {
			return nil, errdefs.Usagef("%s:%d: %s: a key that is not a string", file, k.Line, fieldOr(path))
		}
		if k.Value == "<<" {
			return nil, errdefs.Usagef("%s:%d: %s: YAML merge keys are not read", file, k.Line, fieldOr(path))
		}
		if _, dup := n.kids[k.Value]; dup {
			return nil, errdefs.Usagef("%s:%d: %s: key %s given twice", file, k.Line, fieldOr(path), decodeerr.Field(k.Value))
		}
		c, err := convert(val, join(path, k.Value), file)
		if err != nil {
			return nil, err
		}
		c.line = k.Line
		n.kids[k.Value] = c
		n.order = append(n.order, k.Value)
	}
	return n, nil
}

func fieldOr(path string) string {
	if path == "" {
		return "the top level"
	}
	return decodeerr.Field(path)
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func isOpaque(path string) bool {
	for _, p := range opaque {
		if match(p, path) == len(strings.Split(path, ".")) {
			return true
		}
	}
	return false
}

// match is how many leading segments of path pattern matches ("*" is any
// one segment), 0 when it does not match them all.
func match(pattern, path string) int {
	ps, xs := strings.Split(pattern, "."), strings.Split(path, ".")
	if len(ps) > len(xs) {
		return 0
	}
	for i, p := range ps {
		if p != "*" && p != xs[i] {
			return 0
		}
	}
	return len(ps)
}

// merge lays src over dst as Helm coalesces values files: mappings merge
// key by key, anything else (scalars, lists, null) replaces.
func merge(dst, src *node) {
	if !dst.mapping() || !src.mapping() {
		d, dok := dst.v.(map[string]any)
		s, sok := src.v.(map[string]any)
		*dst = *clone(src)
		if dok && sok {
			// An opaque knob (a nodeSelector) is still a mapping to Helm.
			dst.v = mergeMaps(d, s)
		}
		return
	}
	for _, k := range src.order {
		if d, ok := dst.kids[k]; ok {
			merge(d, src.kids[k])
			continue
		}
		dst.kids[k] = clone(src.kids[k])
		dst.order = append(dst.order, k)
	}
}

// mergeMaps is src laid over dst as Helm does, in a new map.
func mergeMaps(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst)+len(src))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		d, dok := out[k].(map[string]any)
		s, sok := v.(map[string]any)
		if dok && sok {
			out[k] = mergeMaps(d, s)
			continue
		}
		out[k] = v
	}
	return out
}

func clone(n *node) *node {
	c := *n
	if n.mapping() {
		c.kids = make(map[string]*node, len(n.kids))
		c.order = append([]string(nil), n.order...)
		for k, v := range n.kids {
			c.kids[k] = clone(v)
		}
	}
	return &c
}

// get is the node at a dotted path, nil when absent.
func (n *node) get(path string) *node {
	for _, k := range strings.Split(path, ".") {
		if n == nil || !n.mapping() {
			return nil
		}
		n = n.kids[k]
	}
	return n
}

// value is the value at a dotted path, nil when absent or a mapping.
func (n *node) value(path string) any {
	if c := n.get(path); c != nil {
		return c.v
	}
	return nil
}

// leaves calls f for every leaf below n in file order, with its path.
func (n *node) leaves(path string, f func(string, *node)) {
	if !n.mapping() {
		f(path, n)
		return
	}
	for _, k := range n.order {
		n.kids[k].leaves(join(path, k), f)
	}
}

// describe is a list of scalars as "a, b".
func describe(l []any) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}
