package configure

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

// kataRelease is the Kata Containers release whose templates berth's
// configuration is compared with.
const kataRelease = "kata-containers-4.1.0"

// runtimeDir is the source directory of a Kata runtime in the upstream
// tree, which holds its config/ templates and makefile-values.tsv.
func runtimeDir(rt platform.KataRuntime) string {
	if rt == platform.RustRuntime {
		return "src/runtime-rs"
	}
	return "src/runtime"
}

// archValues are the variables the runtimes' Makefiles take from
// arch/<arch>-options.mk, which makefile-values.tsv does not contain, as
// the x86_64 build sets them (src/runtime/arch/amd64-options.mk,
// src/runtime-rs/arch/x86_64-options.mk), plus the make functions the
// kernel names are built with, already applied.
func archValues(rt platform.KataRuntime) map[string]string {
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
	if rt == platform.GoRuntime {
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
// expanded) into name -> value as written.
func makeVars(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
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
		t.Fatal(err)
	}
	return out
}

var makeRef = regexp.MustCompile(`\$\(([A-Za-z0-9_]+)\)`)

// expander resolves make variables as the x86_64 kata-deploy build would,
// with berth's prefix in place of kata-deploy's /opt/kata.
type expander struct {
	vars       map[string]string
	unresolved map[string]bool
}

func newExpander(t *testing.T, rt platform.KataRuntime, prefix string) *expander {
	vars := makeVars(t, upstreamtest.Path(t, kataRelease, runtimeDir(rt), "makefile-values.tsv"))
	for k, v := range archValues(rt) {
		vars[k] = v
	}
	vars["PREFIX"] = prefix
	return &expander{vars: vars, unresolved: map[string]bool{}}
}

func (e *expander) expand(s string, depth int) string {
	if depth > 20 {
		return s
	}
	s = makeRef.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		v, ok := e.vars[name]
		if !ok {
			e.unresolved[name] = true
			return ""
		}
		return e.expand(v, depth+1)
	})
	return makeCall.ReplaceAllStringFunc(s, func(m string) string {
		sub := makeCall.FindStringSubmatch(m)
		n, ok := kernelName(sub[1], sub[2])
		if !ok {
			e.unresolved[sub[1]] = true
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

// expandTemplate turns configuration-<shim>.toml.in into the TOML text
// the build installs, failing the test on an @NAME@ it cannot fill.
func expandTemplate(t *testing.T, file string, e *expander) string {
	t.Helper()
	in, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// Comments are dropped first: an @NAME@ in a comment is never filled.
	var lines []string
	for _, l := range strings.Split(string(in), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			lines = append(lines, l)
		}
	}
	missing := map[string]bool{}
	out := templateRef.ReplaceAllStringFunc(strings.Join(lines, "\n"), func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := e.vars[name]
		if !ok {
			missing[name] = true
			return m
		}
		return shellUnquote(e.expand(v, 0))
	})
	if len(missing) > 0 || len(e.unresolved) > 0 {
		t.Errorf("%s: no value for %v (unresolved make variables %v)", filepath.Base(file), keys(missing), keys(e.unresolved))
	}
	return out
}

// renderTemplate is expandTemplate, parsed.
func renderTemplate(t *testing.T, file string, e *expander) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := toml.Unmarshal([]byte(expandTemplate(t, file, e)), &doc); err != nil {
		t.Fatalf("%s does not parse after expansion: %v", filepath.Base(file), err)
	}
	return doc
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
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

// shimTemplate is one Kata template and the berth platform it configures.
type shimTemplate struct {
	shim string
	file string
	rt   platform.KataRuntime
}

// untemplatedShims are templates berth has no platform for, with why.
// The test fails on a template that is neither a platform's nor here.
func untemplatedShims() map[string]string {
	return map[string]string{
		"src/runtime/qemu-se":               "IBM Secure Execution runs on s390x",
		"src/runtime-rs/qemu-se-runtime-rs": "IBM Secure Execution runs on s390x",
		"src/runtime-rs/rs-fc":              "kata-deploy ships no Firecracker shim of runtime-rs",
		"src/runtime-rs/remote":             "berth's peer-pods platform is the Go runtime's remote shim",
	}
}

func shimTemplates(t *testing.T) []shimTemplate {
	t.Helper()
	var out []shimTemplate
	for _, rt := range platform.KataRuntimes() {
		dir := runtimeDir(rt)
		for _, f := range upstreamtest.Glob(t, filepath.Join(kataRelease, dir, "config", "configuration-*.toml.in")) {
			shim := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "configuration-"), ".toml.in")
			out = append(out, shimTemplate{shim: shim, file: f, rt: rt})
		}
	}
	return out
}

func TestKataConfigConformance(t *testing.T) {
	ps := Paths{Prefix: DefaultPrefix}
	exps := map[platform.KataRuntime]*expander{}
	for _, rt := range platform.KataRuntimes() {
		exps[rt] = newExpander(t, rt, ps.Prefix)
	}
	exceptions := map[string]conformanceException{}
	for _, ex := range conformanceExceptions() {
		exceptions[ex.shim+" "+ex.key] = ex
	}
	used, skipped := map[string]bool{}, map[string]bool{}
	compared := 0
	untemplated := untemplatedShims()
	for _, st := range shimTemplates(t) {
		id := runtimeDir(st.rt) + "/" + st.shim
		if why, ok := untemplated[id]; ok {
			skipped[id] = true
			t.Logf("%s: not compared: %s", id, why)
			continue
		}
		p, err := platform.Parse("kata-" + st.shim)
		if err != nil || p.Shim() != st.shim || p.KataRuntime() != st.rt {
			t.Errorf("%s: no berth platform for this template (%v); add one or list it in untemplatedShims", id, err)
			continue
		}
		t.Run(st.shim+"/"+st.rt.String(), func(t *testing.T) {
			want := leaves(renderTemplate(t, st.file, exps[st.rt]))
			var doc map[string]any
			if err := toml.Unmarshal(KataConfig(p, ps), &doc); err != nil {
				t.Fatal(err)
			}
			got := leaves(doc)
			var diffs []string
			for _, k := range unionKeys(want, got) {
				w, inW := want[k]
				g, inG := got[k]
				if ex, ok := exceptions[st.shim+" "+k]; ok {
					used[st.shim+" "+k] = true
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
			t.Errorf("untemplatedShims: %s names no template (stale entry)", id)
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
	for _, st := range shimTemplates(t) {
		e := newExpander(t, st.rt, DefaultPrefix)
		for table, ks := range flatten(renderTemplate(t, st.file, e)) {
			for _, k := range ks {
				if !slices.Contains(out[table], k) {
					out[table] = append(out[table], k)
				}
			}
		}
	}
	return out
}
