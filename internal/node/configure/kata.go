package configure

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"berth.dev/berth/platform"
)

// DefaultPrefix is where berth installs Kata's binaries and guest
// artefacts (the kata-static layout, relocated).
const DefaultPrefix = "/opt/berth"

// Kata's templates, as berth renders them, are generated data
// (kata_upstream_gen.go) from the copies in testdata/upstream: a new Kata
// release is new data files and a run of katagen, never hand-edited Go.
//go:generate go run ./katagen -upstream ../../../testdata/upstream -o kata_upstream_gen.go

// prefixToken stands for berth's install prefix in template values
// (kata_upstream_gen.go), so that the data does not depend on the prefix
// a node installs to.
const prefixToken = "@PREFIX@"

// kataKey is one key of Kata's configuration with the value a template
// gives it. table is "hypervisor" (the platform's [hypervisor.<section>]),
// "hypervisor.factory" ([hypervisor.<section>.factory]), "agent"
// ([agent.kata]), "agent.mem_agent", "factory" or "runtime". A value of
// type []map[string]any is an array of tables under the table.
type kataKey struct {
	table, key string
	value      any
}

// Paths are the host paths of what a platform runs, all under Prefix.
type Paths struct {
	Prefix string
	// Hypervisor, when set, is the hypervisor binary the configuration
	// runs instead of the one under Prefix (berth config --hypervisor-path:
	// a distribution's QEMU, which berth check probes with the same flag).
	Hypervisor string
	// KataConfigDir, when set, is the host directory the Kata
	// configuration files go to instead of <Prefix>/etc/kata (berth config
	// --kata-config-dir, for sites that keep Kata's configuration with the
	// rest of /etc). The state records the files, so remove needs no flag.
	KataConfigDir string
	// Suffix is the install suffix (suffix.go): it names the handler, the
	// files and the Kata configuration of a side-by-side install.
	Suffix Suffix
	// Custom, when set, is the name of a custom runtime (kata-deploy's
	// customRuntimes): a handler of its own made from the platform and the
	// operator's drop-in. It names the handler, the files and the
	// RuntimeClass instead of the platform.
	Custom string
	// ownDir puts the Kata configuration in a directory of its own,
	// runtimes/<name>/ under the Kata directory: Kata's runtime merges the
	// config.d beside the file it reads, and the shared directory would
	// hand one platform's drop-in to all (Render sets it with a drop-in).
	ownDir bool
	// checked is set when the Paths come from an Install NewInstall
	// validated (Install.Paths): Render does not check them again.
	checked bool
}

// Check refuses paths that berth cannot write into the files it renders
// faithfully, naming the flag that gave each: a prefix or directory that
// is not absolute, or any path with a control character (a newline in
// --prefix would end the ExecStart= line of berth's systemd unit and add
// a directive of its own; see systemdArg for the rest of systemd's
// syntax).
func (ps Paths) Check() error {
	for _, f := range []struct{ flag, v string }{{"--prefix", ps.Prefix}, {"--kata-config-dir", ps.KataConfigDir}, {"--hypervisor-path", ps.Hypervisor}} {
		if f.v == "" {
			continue
		}
		if !path.IsAbs(f.v) {
			return fmt.Errorf("%s %q: expected an absolute path on the host", f.flag, f.v)
		}
		if err := platform.CheckText(f.v); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	return nil
}

// Shim is the containerd shim v2 binary of p's Kata runtime: the Go
// runtime's in bin/, the Rust runtime's in runtime-rs/bin/ (runtime-rs's
// Makefile BINDIR, as in the kata-static release).
func (ps Paths) Shim(p platform.Platform) string {
	return path.Join(ps.Prefix, p.KataRuntime().ShimPath())
}

// KataConfig is the Kata configuration file of platform p (one per
// platform, so that applying p never touches q's file).
func (ps Paths) KataConfig(p platform.Platform) string {
	// Suffixed too under the prefix: two installs given one --prefix
	// still keep apart what they own.
	name := ps.block(p)
	if ps.ownDir {
		return path.Join(ps.kataRoot(), "runtimes", name, name+".toml")
	}
	return path.Join(ps.kataRoot(), name+".toml")
}

// Needs returns the files, relative to the prefix, that p's configuration
// points at and an install must therefore provide: the shim of p's Kata
// runtime, the hypervisor binary, when it has one of its own, and
// containerd-nydus-grpc for a platform on berth's nydus-snapshotter.
func Needs(p platform.Platform) []string {
	rel := Paths{Prefix: "/"}
	out := []string{strings.TrimPrefix(rel.Shim(p), "/")}
	if b := p.HypervisorBinary(); b != "" {
		out = append(out, "bin/"+b)
	}
	if NeedsNydus(p) {
		// The unit berth writes runs it from there.
		out = append(out, NydusBinary)
	}
	return out
}

// NeedsNydus reports whether p's files include berth's nydus-snapshotter
// (its snapshotter is nydus on containerd, or on a custom distribution,
// whose runtime only the node's layout tells).
func NeedsNydus(p platform.Platform) bool {
	if p.Snapshotter().Setup().Proxy != NydusProxy {
		return false
	}
	l, ok := p.Distribution().Layout()
	return !ok || l.Runtime == platform.Containerd
}

func (ps Paths) bin(name string) string { return path.Join(ps.Prefix, "bin", name) }

// KataConfig renders the Kata configuration TOML for p with every path
// under ps.Prefix. It depends only on the platform and the prefix: the
// node's facts do not change it.
//
// Policy: berth writes every key Kata's template for p's shim sets, with
// the template's value as the x86_64 kata-deploy build fills it (PREFIX
// relocated to ps.Prefix), so that Kata's built-in defaults never decide
// anything. berth then changes what it changes on purpose (berthOverrides);
// the conformance test compares each shim's base platform with its
// template and fails on any difference not in conformanceExceptions.
func KataConfig(p platform.Platform, ps Paths) []byte { return kataConfig(p, ps, KataOptions{}) }

// kataConfig is KataConfig with the operator's options (proxy and
// annotations; the drop-in is a file of its own).
func kataConfig(p platform.Platform, ps Paths, o KataOptions) []byte {
	keys := kataKeys(p, ps, o)
	var d doc
	d.comment(header(p, "Kata Containers configuration ("+p.KataConfigFile()+" equivalent)", nil))
	for _, table := range []string{"hypervisor", "hypervisor.factory", "factory", "agent", "agent.mem_agent", "runtime"} {
		var arrays []kataKey
		first := true
		for _, k := range keys {
			if k.table != table {
				continue
			}
			if tabs, ok := k.value.([]map[string]any); ok {
				for _, m := range tabs {
					arrays = append(arrays, kataKey{table: k.key, value: m})
				}
				continue
			}
			if first {
				d.table(kataTable(p, table)...)
				first = false
			}
			kataKV(&d, k.key, k.value)
		}
		for _, a := range arrays {
			d.b.WriteString("\n[[" + tomlKey(append(kataTable(p, table), a.table)...) + "]]\n")
			m := a.value.(map[string]any)
			for _, name := range sortedKeys(m) {
				kataKV(&d, name, m[name])
			}
		}
	}
	return d.bytes()
}

// kataTable is the TOML table name of one of kataKey's tables for p.
func kataTable(p platform.Platform, table string) []string {
	parts := strings.Split(table, ".")
	switch parts[0] {
	case "hypervisor":
		return append([]string{"hypervisor", p.KataSection()}, parts[1:]...)
	case "agent":
		return append([]string{"agent", "kata"}, parts[1:]...)
	}
	return parts
}

// kataKeys returns the keys KataConfig writes for p, in template order.
func kataKeys(p platform.Platform, ps Paths, o KataOptions) []kataKey {
	keys := templateBase(p.KataRuntime())
	set, drop := templateShim(p.TemplateShim())
	keys = slices.DeleteFunc(keys, func(k kataKey) bool { return slices.Contains(drop, k.table+"."+k.key) })
	keys = setKeys(keys, set)
	keys = setKeys(keys, berthOverrides(p, ps, keys, o))
	for i := range keys {
		keys[i].value = relocate(keys[i].value, ps.Prefix)
	}
	// What the VM boots comes first, as in Kata's templates; the rest keeps
	// template order (keys a shim adds sit at the end of their table).
	lead := []string{"path", "ctlpath", "kernel", "image", "initrd", "igvm", "machine_type"}
	rank := func(k kataKey) int {
		if i := slices.Index(lead, k.key); i >= 0 && k.table == "hypervisor" {
			return i
		}
		return len(lead)
	}
	slices.SortStableFunc(keys, func(a, b kataKey) int { return rank(a) - rank(b) })
	return keys
}

// setKeys sets each of set in keys, in place when keys has it, else after
// the last key of its table (at the end when the table is new).
func setKeys(keys, set []kataKey) []kataKey {
	for _, s := range set {
		i := slices.IndexFunc(keys, func(k kataKey) bool { return k.table == s.table && k.key == s.key })
		if i >= 0 {
			keys[i].value = s.value
			continue
		}
		at := len(keys)
		for j := len(keys) - 1; j >= 0; j-- {
			if keys[j].table == s.table {
				at = j + 1
				break
			}
		}
		keys = slices.Insert(keys, at, s)
	}
	return keys
}

// lookup returns the value of table.key in keys.
func lookup(keys []kataKey, table, key string) (any, bool) {
	for _, k := range keys {
		if k.table == table && k.key == key {
			return k.value, true
		}
	}
	return nil, false
}

// upstreamKubeletRoot is the kubelet root Kata's templates write.
const upstreamKubeletRoot = "/var/lib/kubelet"

// berthOverrides are the keys berth sets differently from p's template,
// on purpose. Each one that shows on a shim's base platform is listed in
// conformanceExceptions (conformance_test.go) with its reason.
func berthOverrides(p platform.Platform, ps Paths, keys []kataKey, o KataOptions) []kataKey {
	var out []kataKey
	set := func(table, key string, v any) { out = append(out, kataKey{table, key, v}) }
	if hp := hypervisorPath(p, ps); hp != "" {
		// berth installs one build of each hypervisor under its prefix
		// (Needs lists it): the shims that name an experimental QEMU
		// build use that one too.
		set("hypervisor", "path", hp)
		set("hypervisor", "valid_hypervisor_paths", []any{hp})
	}
	if v, ok := lookup(keys, "hypervisor", "kernel"); ok {
		if k, _ := v.(string); k != "" && !strings.HasPrefix(k, prefixToken+"/") {
			// Everything berth runs comes from its prefix, never from a
			// distribution package.
			set("hypervisor", "kernel", path.Join(prefixToken, "share/kata-containers", path.Base(k)))
		}
	}
	if p.Shim() == "" {
		// Confidential AKS: Cloud Hypervisor on Hyper-V boots the SNP guest
		// from an IGVM file and shares nothing with the host.
		set("hypervisor", "confidential_guest", true)
		set("hypervisor", "sev_snp_guest", true)
		set("hypervisor", "igvm", path.Join(prefixToken, "share/kata-containers/kata-containers-igvm.img"))
		// As Contrast renders AKS-CLH-SNP (edgelesssys/contrast
		// node-installer/internal/constants/constants.go, and
		// platforms.go DefaultMemoryInMegaBytes): the VM is sized
		// statically, 256 MiB for the guest plus the containers' limits,
		// or the default workload memory when they set none; the tardev
		// snapshotter shares nothing over virtio-fs.
		set("hypervisor", "default_memory", p.DefaultMemoryMiB())
		set("hypervisor", "shared_fs", p.SharedFS())
		set("runtime", "static_sandbox_resource_mgmt", true)
		set("runtime", "static_sandbox_default_workload_mem", p.StaticWorkloadMemoryMiB())
	}
	if p.Local() && p.Snapshotter() != p.DefaultSnapshotter() {
		if v, ok := lookup(keys, "hypervisor", "shared_fs"); ok && v != p.SharedFS() {
			// Snapshotter variants of a shim (a TEE shim with overlayfs
			// shares the image from the host) need the shared filesystem
			// the variant implies, which the shim's template may turn off.
			set("hypervisor", "shared_fs", p.SharedFS())
		}
	}
	if root := "/" + p.Distribution().KubeletRoot(); root != upstreamKubeletRoot {
		// Kata's templates assume the kubelet's default root; k0s and
		// microk8s move it, and ConfigMap/Secret propagation and GPU
		// cold-plug (the pod-resources socket) look for it there.
		if _, ok := lookup(keys, "runtime", "kubelet_root_dir"); ok {
			set("runtime", "kubelet_root_dir", root)
		}
		if v, ok := lookup(keys, "runtime", "pod_resource_api_sock"); ok {
			if s, _ := v.(string); strings.HasPrefix(s, upstreamKubeletRoot+"/") {
				set("runtime", "pod_resource_api_sock", root+strings.TrimPrefix(s, upstreamKubeletRoot))
			}
		}
	}
	if p.ForcedGuestPull() {
		set("runtime", "experimental_force_guest_pull", true)
	}
	if p.Debug() {
		// The debug variant: kata-deploy's -debug RuntimeClasses turn on
		// the same switches.
		set("hypervisor", "enable_debug", true)
		set("agent", "enable_debug", true)
		set("agent", "debug_console_enabled", true)
		set("runtime", "enable_debug", true)
	}
	// The guest's kernel parameters: the operator's proxy, then the debug
	// variant's, after the template's, in kata-deploy's order
	// (generate_kernel_params_drop_in).
	add := o.kernelParams()
	if p.Debug() {
		add = append(add, "agent.log=debug", "initcall_debug")
	}
	if len(add) > 0 {
		params, _ := lookup(keys, "hypervisor", "kernel_params")
		s, _ := params.(string)
		set("hypervisor", "kernel_params", strings.TrimSpace(s+" "+strings.Join(add, " ")))
	}
	if len(o.Annotations) > 0 {
		have, _ := lookup(keys, "hypervisor", "enable_annotations")
		set("hypervisor", "enable_annotations", mergeAnnotations(have, o.Annotations))
	}
	return out
}

// relocate puts berth's prefix where the template values say prefixToken.
func relocate(v any, prefix string) any {
	switch x := v.(type) {
	case string:
		return strings.ReplaceAll(x, prefixToken, prefix)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = relocate(e, prefix)
		}
		return out
	case []map[string]any:
		out := make([]map[string]any, len(x))
		for i, e := range x {
			out[i] = relocate(e, prefix).(map[string]any)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = relocate(e, prefix)
		}
		return out
	}
	return v
}

// kataKV writes key = value for the value types Kata's templates use.
func kataKV(d *doc, key string, v any) {
	d.b.WriteString(key + " = " + kataValue(v) + "\n")
}

// kataValue is the TOML form of a template value: the scalar types
// tomlValue knows, floats, and arrays of them.
func kataValue(v any) string {
	switch x := v.(type) {
	case float64:
		s := strconv.FormatFloat(x, 'f', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		return s
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = kataValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return tomlValue(v)
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// hypervisorPath is the hypervisor binary of p, or "" when none runs as
// its own program (Dragonball lives in the Rust shim; peer pods run in a
// cloud).
func hypervisorPath(p platform.Platform, ps Paths) string {
	b := p.HypervisorBinary()
	switch {
	case b == "":
		return ""
	case ps.Hypervisor != "":
		return ps.Hypervisor
	}
	return ps.bin(b)
}
