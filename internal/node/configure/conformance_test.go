package configure

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"berth.dev/berth/internal/node/configure/katatemplate"
	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

// runtimeDir is the source directory of a Kata runtime in the upstream
// tree, which holds its config/ templates and makefile-values.tsv.
func runtimeDir(rt platform.KataRuntime) string {
	if rt == platform.RustRuntime {
		return katatemplate.RustRuntime
	}
	return katatemplate.GoRuntime
}

// expanders returns one katatemplate.Expander per Kata runtime, keyed by
// its source directory, with the prefix set to prefix.
func expanders(t *testing.T, prefix string) map[string]*katatemplate.Expander {
	t.Helper()
	out := map[string]*katatemplate.Expander{}
	for _, rt := range platform.KataRuntimes() {
		e, err := katatemplate.NewExpander(upstreamtest.Dir(t), runtimeDir(rt), prefix)
		if err != nil {
			t.Fatal(err)
		}
		out[runtimeDir(rt)] = e
	}
	return out
}

// renderTemplate is st's template expanded and parsed, failing the test
// when a name cannot be filled or the result does not parse.
func renderTemplate(t *testing.T, st katatemplate.Template, exps map[string]*katatemplate.Expander) map[string]any {
	t.Helper()
	doc, err := exps[st.Runtime].ExpandFile(st.File)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// leaves flattens a parsed TOML document into dotted key -> value.
func leaves(doc map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			name := k
			if prefix != "" {
				name = prefix + "." + k
			}
			if sub, ok := v.(map[string]any); ok {
				walk(name, sub)
				continue
			}
			out[name] = normalise(v)
		}
	}
	walk("", doc)
	return out
}

// normalise makes values that Kata reads the same compare equal: TOML
// arrays decode as []any, which is what both sides produce.
func normalise(v any) any {
	if a, ok := v.([]any); ok {
		out := make([]any, len(a))
		for i, x := range a {
			out[i] = normalise(x)
		}
		return out
	}
	return v
}

// shimTemplates are Kata's templates in testdata/upstream, failing the
// test when there are none.
func shimTemplates(t *testing.T) []katatemplate.Template {
	t.Helper()
	ts, err := katatemplate.Templates(upstreamtest.Dir(t))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestKataConfigConformance(t *testing.T) {
	ps := Paths{Prefix: DefaultPrefix}
	exps := expanders(t, ps.Prefix)
	exceptions := map[string]conformanceException{}
	for _, ex := range conformanceExceptions() {
		exceptions[ex.shim+" "+ex.key] = ex
	}
	used, skipped := map[string]bool{}, map[string]bool{}
	compared := 0
	untemplated := katatemplate.Untemplated()
	for _, st := range shimTemplates(t) {
		id := st.ID()
		if why, ok := untemplated[id]; ok {
			skipped[id] = true
			t.Logf("%s: not compared: %s", id, why)
			continue
		}
		p, err := platform.Parse("kata-" + st.Shim)
		if err != nil || p.Shim() != st.Shim || runtimeDir(p.KataRuntime()) != st.Runtime {
			t.Errorf("%s: no berth platform for this template (%v); add one or list it in katatemplate.Untemplated", id, err)
			continue
		}
		t.Run(st.Shim+"/"+p.KataRuntime().String(), func(t *testing.T) {
			want := leaves(renderTemplate(t, st, exps))
			var doc map[string]any
			if err := toml.Unmarshal(KataConfig(p, ps), &doc); err != nil {
				t.Fatal(err)
			}
			got := leaves(doc)
			var diffs []string
			for _, k := range unionKeys(want, got) {
				w, inW := want[k]
				g, inG := got[k]
				if ex, ok := exceptions[st.Shim+" "+k]; ok {
					used[st.Shim+" "+k] = true
					if !inG || !inW || reflect.DeepEqual(w, g) || !reflect.DeepEqual(g, ex.berth) || !reflect.DeepEqual(w, ex.template) {
						diffs = append(diffs, fmt.Sprintf("! %s: listed in conformanceExceptions as %#v (template %#v), now %#v (template %#v)", k, ex.berth, ex.template, g, w))
					}
					continue
				}
				switch {
				case !inG:
					diffs = append(diffs, fmt.Sprintf("- %s = %#v", k, w))
				case !inW:
					diffs = append(diffs, fmt.Sprintf("+ %s = %#v", k, g))
				case !reflect.DeepEqual(w, g):
					diffs = append(diffs, fmt.Sprintf("~ %s = %#v, template %#v", k, g, w))
				}
			}
			if len(diffs) > 0 {
				t.Errorf("%s: %d differences:\n%s", p, len(diffs), strings.Join(diffs, "\n"))
			}
		})
		compared++
	}
	for id := range untemplated {
		if !skipped[id] {
			t.Errorf("katatemplate.Untemplated: %s names no template (stale entry)", id)
		}
	}
	for k := range exceptions {
		if !used[k] {
			t.Errorf("conformanceExceptions: %s names no compared shim and key (stale entry)", k)
		}
	}
	t.Logf("%d shims compared, %d documented differences", compared, len(exceptions))
}

// conformanceException is one reviewed difference between berth's Kata
// configuration of a shim's base platform and the shim's template.
type conformanceException struct {
	shim, key       string // key is the dotted TOML key
	berth, template any    // values as parsed from TOML
	reason          string
}

// conformanceExceptions is the one reviewed list of the differences
// between berth's Kata configurations and Kata 4.1.0's templates. The
// conformance test fails on any difference not listed here and on any
// entry whose difference is gone or has changed.
func conformanceExceptions() []conformanceException {
	const (
		qemu      = DefaultPrefix + "/bin/qemu-system-x86_64"
		oneQEMU   = "berth installs one QEMU (bin/qemu-system-x86_64, at least 9.1 for SNP and 10.1 for TDX, which launch both TEEs) and points every QEMU shim at it; the Go GPU TEE templates still name the experimental builds"
		azKernel  = "/usr/share/cloud-hypervisor/vmlinux.bin"
		berthKern = DefaultPrefix + "/share/kata-containers/vmlinux.bin"
		ownPrefix = "everything berth runs comes from its prefix, never from a distribution package; the -azure templates name the Azure Linux package's kernel"
	)
	return []conformanceException{
		{"qemu-nvidia-gpu-snp", "hypervisor.qemu.path", qemu, qemu + "-snp-experimental", oneQEMU},
		{"qemu-nvidia-gpu-snp", "hypervisor.qemu.valid_hypervisor_paths", []any{qemu}, []any{qemu + "-snp-experimental"}, oneQEMU},
		{"qemu-nvidia-gpu-tdx", "hypervisor.qemu.path", qemu, qemu + "-tdx-experimental", oneQEMU},
		{"qemu-nvidia-gpu-tdx", "hypervisor.qemu.valid_hypervisor_paths", []any{qemu}, []any{qemu + "-tdx-experimental"}, oneQEMU},
		{"clh-azure", "hypervisor.clh.kernel", berthKern, azKernel, ownPrefix},
		{"clh-azure-runtime-rs", "hypervisor.clh.kernel", berthKern, azKernel, ownPrefix},
	}
}

func unionKeys(a, b map[string]any) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// templateKeys lists, per table ("hypervisor.qemu", "agent.kata"), every
// key any of Kata's templates sets: the keys Kata reads.
func templateKeys(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	exps := expanders(t, DefaultPrefix)
	for _, st := range shimTemplates(t) {
		for table, ks := range flatten(renderTemplate(t, st, exps)) {
			for _, k := range ks {
				if !slices.Contains(out[table], k) {
					out[table] = append(out[table], k)
				}
			}
		}
	}
	return out
}
