// Command katagen writes internal/node/configure/kata_upstream_gen.go: Kata
// Containers' configuration templates as berth renders them, derived from
// the copies in testdata/upstream (see its README and provenance.tsv) by
// the expansion in package katatemplate. The data is generated Go, not the
// templates embedded and parsed at run time: berth would carry about
// 900 KB of templates and parse TOML on every render, and its size and
// start-up time are budgeted (README, "Performance").
//
// For each Kata runtime it writes the base (every key that at least half
// of the runtime's templates set to the same value, with that value) and,
// per template, what the template sets differently and which
// base keys it leaves out. Run it after changing the templates or
// katatemplate:
//
//	go generate ./internal/node/configure
//
// Its test holds kata_upstream_gen.go equal to what it writes now.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"berth.dev/berth/internal/node/configure/katatemplate"

	"berth.dev/berth/internal/host/gensrc"
)

func main() {
	upstream := flag.String("upstream", "../../../testdata/upstream", "the upstream reference files (testdata/upstream)")
	out := flag.String("o", "kata_upstream_gen.go", "file to write (- for stdout)")
	flag.Parse()
	src, err := Source(*upstream)
	if err != nil {
		fmt.Fprintln(os.Stderr, "katagen:", err)
		os.Exit(1)
	}
	if err := gensrc.Emit(*out, src); err != nil {
		fmt.Fprintln(os.Stderr, "katagen:", err)
		os.Exit(1)
	}
}

// prefix is what the templates' PREFIX is set to: the generated values
// keep it as a token that KataConfig relocates to the install prefix.
const prefix = "@PREFIX@"

// tables are berth's names for the tables of a Kata configuration (see
// kataKey), in the order KataConfig writes them.
var tables = []string{"hypervisor", "hypervisor.factory", "factory", "agent", "agent.mem_agent", "runtime"}

// key is one setting of a template in berth's terms.
type key struct {
	table, name string
	value       any
}

func (k key) id() string { return k.table + "." + k.name }

// template is one template's settings, in its order.
type template struct {
	katatemplate.Template
	keys []key
}

// berthTable maps a template's table ("hypervisor.qemu", "agent.kata.mem_agent")
// to berth's name for it: the hypervisor section and the agent name are
// the platform's, filled in at render time.
func berthTable(t string) (string, error) {
	parts := strings.Split(t, ".")
	out := t
	if parts[0] == "hypervisor" || parts[0] == "agent" {
		if len(parts) < 2 {
			return "", fmt.Errorf("table [%s] names no %s", t, parts[0])
		}
		out = strings.Join(append(parts[:1:1], parts[2:]...), ".")
	}
	if !slices.Contains(tables, out) {
		return "", fmt.Errorf("table [%s] is none berth writes", t)
	}
	return out, nil
}

// goValue turns a decoded TOML value into the Go value KataConfig writes:
// int for integers (what its TOML writer takes), []map[string]any for an
// array of tables.
func goValue(v any) (any, error) {
	switch x := v.(type) {
	case string, bool, float64:
		return x, nil
	case int64:
		return int(x), nil
	case []any:
		if len(x) > 0 {
			if _, ok := x[0].(map[string]any); ok {
				out := make([]map[string]any, len(x))
				for i, e := range x {
					m, ok := e.(map[string]any)
					if !ok {
						return nil, fmt.Errorf("array mixes tables and %T", e)
					}
					mm := make(map[string]any, len(m))
					for k, ev := range m {
						gv, err := goValue(ev)
						if err != nil {
							return nil, err
						}
						mm[k] = gv
					}
					out[i] = mm
				}
				return out, nil
			}
		}
		out := make([]any, len(x))
		for i, e := range x {
			gv, err := goValue(e)
			if err != nil {
				return nil, err
			}
			out[i] = gv
		}
		return out, nil
	}
	return nil, fmt.Errorf("no Go form for %T", v)
}

// load expands every template berth configures a platform from.
func load(upstream string) ([]template, error) {
	all, err := katatemplate.Templates(upstream)
	if err != nil {
		return nil, err
	}
	exps := map[string]*katatemplate.Expander{}
	untemplated := katatemplate.Untemplated()
	var out []template
	for _, t := range all {
		if _, skip := untemplated[t.ID()]; skip {
			continue
		}
		e := exps[t.Runtime]
		if e == nil {
			if e, err = katatemplate.NewExpander(upstream, t.Runtime, prefix); err != nil {
				return nil, err
			}
			exps[t.Runtime] = e
		}
		in, err := os.ReadFile(t.File)
		if err != nil {
			return nil, err
		}
		text, err := e.Expand(in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.ID(), err)
		}
		ks, err := katatemplate.Keys(text)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.ID(), err)
		}
		tt := template{Template: t}
		for _, k := range ks {
			table, err := berthTable(k.Table)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.ID(), err)
			}
			v, err := goValue(k.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: %s.%s: %w", t.ID(), k.Table, k.Name, err)
			}
			tt.keys = append(tt.keys, key{table, k.Name, v})
		}
		out = append(out, tt)
	}
	return out, nil
}

// base is the keys at least half of ts set to the same value, with that
// value; table by table, in the order the templates first set them. Two
// values that half of ts each give make the base ambiguous: an error, not
// a guess.
func base(ts []template) ([]key, error) {
	type count struct {
		value any
		n     int
	}
	counts := map[string][]count{}
	for _, t := range ts {
		for _, k := range t.keys {
			cs := counts[k.id()]
			i := slices.IndexFunc(cs, func(c count) bool { return reflect.DeepEqual(c.value, k.value) })
			if i < 0 {
				cs = append(cs, count{value: k.value})
				i = len(cs) - 1
			}
			cs[i].n++
			counts[k.id()] = cs
		}
	}
	var out []key
	done := map[string]bool{}
	for _, table := range tables {
		for _, t := range ts {
			for _, k := range t.keys {
				if k.table != table || done[k.id()] {
					continue
				}
				done[k.id()] = true
				var common []any
				for _, c := range counts[k.id()] {
					if 2*c.n >= len(ts) {
						common = append(common, c.value)
					}
				}
				switch len(common) {
				case 0:
				case 1:
					out = append(out, key{k.table, k.name, common[0]})
				default:
					return nil, fmt.Errorf("%s: half of the %d templates set %#v and half %#v: no base value", k.id(), len(ts), common[0], common[1])
				}
			}
		}
	}
	return out, nil
}

// diff is what t sets differently from b (in t's order) and the keys of b
// it does not set ("table.key", sorted).
func diff(b []key, t template) (set []key, drop []string) {
	for _, k := range t.keys {
		i := slices.IndexFunc(b, func(x key) bool { return x.id() == k.id() })
		if i < 0 || !reflect.DeepEqual(b[i].value, k.value) {
			set = append(set, k)
		}
	}
	for _, k := range b {
		if !slices.ContainsFunc(t.keys, func(x key) bool { return x.id() == k.id() }) {
			drop = append(drop, k.id())
		}
	}
	sort.Strings(drop)
	return set, drop
}

// Source returns the formatted source of kata_upstream_gen.go.
func Source(upstream string) ([]byte, error) {
	ts, err := load(upstream)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `// Code generated by berth.dev/berth/internal/node/configure/katagen; DO NOT EDIT.

// The tables below are Kata Containers' configuration templates
// (testdata/upstream/%s, src/runtime/config and src/runtime-rs/config)
// as the x86_64 kata-deploy build fills them, with the prefix as
// prefixToken: one base per runtime and each shim's changes to it.

package configure

import "berth.dev/berth/platform"

`, katatemplate.Release)
	bases := map[string][]key{}
	for _, rt := range katatemplate.Runtimes() {
		var rts []template
		for _, t := range ts {
			if t.Runtime == rt {
				rts = append(rts, t)
			}
		}
		if len(rts) == 0 {
			return nil, fmt.Errorf("no template of %s", rt)
		}
		if bases[rt], err = base(rts); err != nil {
			return nil, fmt.Errorf("%s: %w", rt, err)
		}
	}
	b.WriteString(`// templateBase returns the keys at least half of rt's templates set to
// the same value, with that value, in the order the templates first set
// them. templateShim adjusts them per shim.
func templateBase(rt platform.KataRuntime) []kataKey {
	if rt == platform.RustRuntime {
		return []kataKey{
`)
	writeKeys(&b, bases[katatemplate.RustRuntime])
	b.WriteString("}\n}\nreturn []kataKey{\n")
	writeKeys(&b, bases[katatemplate.GoRuntime])
	b.WriteString(`}
}

// templateShim returns what shim's template sets differently from
// templateBase of its runtime (changed or extra keys, in template order)
// and the keys of the base it does not set ("table.key").
func templateShim(shim string) (set []kataKey, drop []string) {
	switch shim {
`)
	seen := map[string]bool{}
	for _, t := range ts {
		if seen[t.Shim] {
			return nil, fmt.Errorf("two templates of shim %s", t.Shim)
		}
		seen[t.Shim] = true
		set, drop := diff(bases[t.Runtime], t)
		fmt.Fprintf(&b, "case %q:\n", t.Shim)
		if len(set) > 0 {
			b.WriteString("set = []kataKey{\n")
			writeKeys(&b, set)
			b.WriteString("}\n")
		}
		if len(drop) > 0 {
			fmt.Fprintf(&b, "drop = %#v\n", drop)
		}
	}
	b.WriteString("}\nreturn set, drop\n}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the generated code: %w\n%s", err, b.Bytes())
	}
	return src, nil
}

func writeKeys(b *bytes.Buffer, ks []key) {
	for _, k := range ks {
		fmt.Fprintf(b, "{%q, %q, %s},\n", k.table, k.name, literal(k.value))
	}
}

// literal is the Go source of a value goValue returns.
func literal(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case float64:
		return "float64(" + strconv.FormatFloat(x, 'g', -1, 64) + ")"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = literal(e)
		}
		return "[]any{" + strings.Join(parts, ", ") + "}"
	case []map[string]any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = literal(e)
		}
		return "[]map[string]any{" + strings.Join(parts, ", ") + "}"
	case map[string]any:
		names := make([]string, 0, len(x))
		for k := range x {
			names = append(names, k)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, k := range names {
			parts[i] = strconv.Quote(k) + ": " + literal(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	panic(fmt.Sprintf("katagen: no literal for %T", v))
}
