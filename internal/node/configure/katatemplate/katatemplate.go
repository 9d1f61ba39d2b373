// Package katatemplate fills Kata Containers' configuration templates
// (configuration-<shim>.toml.in) the way the x86_64 kata-deploy build
// does, from the copies in testdata/upstream. It is the one expansion that
// both generates berth's Kata template data (katagen) and checks berth's
// rendered configurations against the templates (the conformance test), so
// that the two can never disagree about what a template says. berth itself
// never links it: the binary carries only the generated data.
package katatemplate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Release is the Kata Containers release whose templates berth follows:
// its folder in testdata/upstream.
const Release = "kata-containers-4.1.0"

// The source directories of Kata's two runtimes, which hold their config/
// templates and makefile-values.tsv. Kata's names, not berth's: the
// generator and the conformance test map them to berth's runtimes.
const (
	GoRuntime   = "src/runtime"
	RustRuntime = "src/runtime-rs"
)

// Runtimes are the runtimes' source directories, in the order berth lists
// its runtimes (Go first).
func Runtimes() []string { return []string{GoRuntime, RustRuntime} }

// Template is one of Kata's configuration templates.
type Template struct {
	Runtime string // GoRuntime or RustRuntime
	Shim    string // configuration-<Shim>.toml.in
	File    string // its path
}

// ID names the template uniquely: both runtimes have a "remote" shim.
func (t Template) ID() string { return t.Runtime + "/" + t.Shim }

// Templates returns every template of Release under upstream (the
// testdata/upstream folder), Go runtime first, each runtime's sorted by
// file name. An empty result is an error: it would make every comparison
// pass.
func Templates(upstream string) ([]Template, error) {
	var out []Template
	for _, rt := range Runtimes() {
		pattern := filepath.Join(upstream, Release, rt, "config", "configuration-*.toml.in")
		files, err := filepath.Glob(pattern)
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("no Kata template matches %s", pattern)
		}
		for _, f := range files {
			shim := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "configuration-"), ".toml.in")
			out = append(out, Template{Runtime: rt, Shim: shim, File: f})
		}
	}
	return out, nil
}

// archValues are the variables the runtimes' Makefiles take from
// arch/<arch>-options.mk, which makefile-values.tsv does not contain, as
// the x86_64 build sets them (src/runtime/arch/amd64-options.mk,
// src/runtime-rs/arch/x86_64-options.mk), plus the make functions the
// kernel names are built with, already applied.
func archValues(runtime string) map[string]string {
	v := map[string]string{
		"ARCH":                "x86_64",
		"MACHINETYPE":         "q35",
		"KERNELPARAMS":        "cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1",
		"KERNELTDXPARAMS":     "cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1",
		"MACHINEACCELERATORS": "",
		"CPUFEATURES":         "pmu=off",
		"QEMUCMD":             "qemu-system-x86_64",
		"FCCMD":               "firecracker",
		"FCJAILERCMD":         "jailer",
		"CLHCMD":              "cloud-hypervisor",
		// The Makefiles set the firmware paths in arm64-only branches,
		// which makefile-values.tsv lists as if taken; on x86_64 they stay
		// empty (QEMU's built-in SeaBIOS/OVMF).
		"FIRMWAREPATH":          "",
		"FIRMWAREVOLUMEPATH":    "",
		"FIRMWAREPATH_NV":       "",
		"FIRMWAREVOLUMEPATH_NV": "",
	}
	if runtime == GoRuntime {
		v["QEMUTDXCMD"] = "qemu-system-x86_64-tdx-experimental"
		v["QEMUSNPCMD"] = "qemu-system-x86_64-snp-experimental"
		v["TDXCPUFEATURES"] = "-vmx-rdseed-exit,pmu=off"
		v["DEFSTATICRESOURCEMGMT_CLH"] = "false"
		v["STRATOVIRTCMD"] = "stratovirt"
		v["QEMUTDXEXPERIMENTALCMD"] = "qemu-system-x86_64-tdx-experimental"
		// Not in the Makefile's table: the coco-dev kernel parameters are
		// the x86_64 defaults.
		v["KERNELQEMUCOCODEVPARAMS"] = v["KERNELPARAMS"]
	} else {
		v["DBCMD"] = "dragonball"
		v["REMOTE"] = "remote"
		// Dragonball runs inside the shim: no hypervisor binary, and the
		// Makefile leaves both paths undefined (empty).
		v["DBPATH"] = ""
		v["DBCTLPATH"] = ""
		// runtime-rs's x86_64 build runs every QEMU shim on the one
		// kata-static QEMU.
		v["QEMUNOSHAREDFSCMD"] = "qemu-system-x86_64"
		v["QEMUSNPCMD"] = "qemu-system-x86_64"
		v["QEMUTDXCMD"] = "qemu-system-x86_64"
	}
	return v
}

// makeCall matches the make functions ($(call NAME,type)) the kernel file
// names are computed with: "compressed" picks the vmlinuz form.
var makeCall = regexp.MustCompile(`\$\(call ([A-Z_]+),([a-z]+)\)`)

func kernelName(fn, kind string) (string, bool) {
	stem := map[string]string{"MAKE_KERNEL_NAME": "", "MAKE_KERNEL_NAME_NV": "-nvidia-gpu",
		"MAKE_KERNEL_NAME_DB": "-dragonball-experimental", "MAKE_KERNEL_NAME_FC": ""}
	s, ok := stem[fn]
	if !ok {
		return "", false
	}
	if kind == "compressed" {
		return "vmlinuz" + s + ".container", true
	}
	return "vmlinux" + s + ".container", true
}

// makeVars reads a runtime's makefile-values.tsv (name, as written,
// expanded) into name -> value as written: the expanded column has the
// conditionals' branches already chosen for another architecture.
func makeVars(file string) (map[string]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") || strings.HasPrefix(l, "name\t") {
			continue
		}
		f := strings.Split(l, "\t")
		if len(f) < 2 {
			continue
		}
		if _, dup := out[f[0]]; !dup {
			out[f[0]] = f[1]
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return out, nil
}

var makeRef = regexp.MustCompile(`\$\(([A-Za-z0-9_]+)\)`)

// Expander resolves one runtime's make variables as the x86_64 kata-deploy
// build would, with berth's prefix in place of kata-deploy's /opt/kata.
type Expander struct {
	vars map[string]string
}

// NewExpander reads runtime's makefile-values.tsv from upstream (the
// testdata/upstream folder) and sets PREFIX to prefix.
func NewExpander(upstream, runtime, prefix string) (*Expander, error) {
	vars, err := makeVars(filepath.Join(upstream, Release, runtime, "makefile-values.tsv"))
	if err != nil {
		return nil, err
	}
	for k, v := range archValues(runtime) {
		vars[k] = v
	}
	vars["PREFIX"] = prefix
	return &Expander{vars: vars}, nil
}

func (e *Expander) expand(s string, depth int, unresolved map[string]bool) string {
	if depth > 20 {
		return s
	}
	s = makeRef.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := e.vars[name]
		if !ok {
			unresolved[name] = true
			return ""
		}
		return e.expand(v, depth+1, unresolved)
	})
	return makeCall.ReplaceAllStringFunc(s, func(m string) string {
		sub := makeCall.FindStringSubmatch(m)
		n, ok := kernelName(sub[1], sub[2])
		if !ok {
			unresolved[sub[1]] = true
		}
		return n
	})
}

// shellUnquote applies what the shell does to a value the Makefile pastes
// into a double-quoted sed expression: \" becomes ", a bare " ends or
// starts a quoted run and disappears.
func shellUnquote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
			b.WriteByte(s[i+1])
			i++
		case s[i] == '"':
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

var templateRef = regexp.MustCompile(`@([A-Za-z0-9_]+)@`)

// Expand turns a configuration-<shim>.toml.in into the TOML text the build
// installs. An @NAME@ or make variable it cannot fill is an error, with
// the text as far as it got: a guessed value would hide a new variable of
// a new Kata release.
func (e *Expander) Expand(template []byte) (string, error) {
	// Comments are dropped first: an @NAME@ in a comment is never filled.
	var lines []string
	for _, l := range strings.Split(string(template), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			lines = append(lines, l)
		}
	}
	missing, unresolved := map[string]bool{}, map[string]bool{}
	out := templateRef.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := e.vars[name]
		if !ok {
			missing[name] = true
			return m
		}
		return shellUnquote(e.expand(v, 0, unresolved))
	})
	if len(missing) > 0 || len(unresolved) > 0 {
		return out, fmt.Errorf("no value for %v (unresolved make variables %v)", sortedKeys(missing), sortedKeys(unresolved))
	}
	return out, nil
}

// ExpandFile is Expand of the template in file, parsed.
func (e *Expander) ExpandFile(file string) (map[string]any, error) {
	in, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	text, err := e.Expand(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(file), err)
	}
	var doc map[string]any
	if err := toml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, fmt.Errorf("%s does not parse after expansion: %w", filepath.Base(file), err)
	}
	return doc, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Key is one key an expanded template sets, where Table is the dotted
// table it is in ("hypervisor.qemu", "agent.kata.mem_agent") and Value is
// as go-toml decodes it. An array of tables ([[T.name]]) is one Key
// {T, name, []any of map[string]any} at its first element.
type Key struct {
	Table, Name string
	Value       any
}

// Keys returns the keys of an expanded template in the order the template
// sets them: berth writes its configurations in Kata's order, which a
// decoded map has lost.
func Keys(text string) ([]Key, error) {
	var doc map[string]any
	if err := toml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, err
	}
	var out []Key
	seen := map[string]bool{}
	var table []string
	inArray := false // the keys of an array's element belong to its value
	var p unstable.Parser
	p.Reset([]byte(text))
	for p.NextExpression() {
		n := p.Expression()
		switch n.Kind {
		case unstable.Table:
			table, inArray = keyParts(n.Key()), false
		case unstable.ArrayTable:
			full := keyParts(n.Key())
			inArray = true
			id := strings.Join(full, ".")
			if seen[id] {
				continue
			}
			seen[id] = true
			v, err := lookup(doc, full)
			if err != nil {
				return nil, err
			}
			out = append(out, Key{Table: strings.Join(full[:len(full)-1], "."), Name: full[len(full)-1], Value: v})
		case unstable.KeyValue:
			if inArray {
				continue
			}
			parts := append(slices.Clone(table), keyParts(n.Key())...)
			v, err := lookup(doc, parts)
			if err != nil {
				return nil, err
			}
			out = append(out, Key{Table: strings.Join(parts[:len(parts)-1], "."), Name: parts[len(parts)-1], Value: v})
		}
	}
	if err := p.Error(); err != nil {
		return nil, err
	}
	return out, nil
}

func keyParts(it unstable.Iterator) []string {
	var out []string
	for it.Next() {
		out = append(out, string(it.Node().Data))
	}
	return out
}

// lookup is the value at path in a decoded document.
func lookup(doc map[string]any, path []string) (any, error) {
	var cur any = doc
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %s is not a table", strings.Join(path, "."), p)
		}
		if cur, ok = m[p]; !ok {
			return nil, errors.New(strings.Join(path, ".") + ": not in the decoded document")
		}
	}
	return cur, nil
}

// Untemplated are the templates berth configures no platform from, by
// Template.ID, with why: the generator leaves them out and the conformance
// test fails on any other template that no platform of berth's names.
func Untemplated() map[string]string {
	return map[string]string{
		"src/runtime/qemu-se":               "IBM Secure Execution runs on s390x",
		"src/runtime-rs/qemu-se-runtime-rs": "IBM Secure Execution runs on s390x",
		"src/runtime-rs/rs-fc":              "kata-deploy ships no Firecracker shim of runtime-rs",
		"src/runtime-rs/remote":             "berth's peer-pods platform is the Go runtime's remote shim",
	}
}
