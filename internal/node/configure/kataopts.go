package configure

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"berth.dev/berth/platform"
)

// KataOptions are an operator's tuning of one platform's Kata
// configuration: kata-deploy 4.1's shims.<name>.dropIn,
// shims.<name>.agent.{httpsProxy,noProxy} and
// shims.<name>.allowedHypervisorAnnotations. The zero value changes
// nothing, so that a render without them is byte for byte today's.
type KataOptions struct {
	// DropIn is a TOML drop-in of Kata's configuration, written as
	// config.d/50-user-overrides.toml beside the platform's file, which
	// Kata's runtime merges key by key over it (katautils decodeDropIns).
	DropIn []byte
	// DropInSource names where DropIn came from (a flag and file), for
	// messages.
	DropInSource string
	// HTTPSProxy and NoProxy go into the guest kernel's command line as
	// agent.https_proxy= and agent.no_proxy=, as kata-deploy writes them.
	HTTPSProxy, NoProxy string
	// Annotations are hypervisor annotations added to the platform's
	// enable_annotations (short names, as Kata's configuration lists them).
	Annotations []string
}

// IsZero reports whether o changes nothing.
func (o KataOptions) IsZero() bool {
	return o.DropIn == nil && o.HTTPSProxy == "" && o.NoProxy == "" && len(o.Annotations) == 0
}

// UserDropInName is the file kata-deploy writes a shim's dropIn to, in the
// config.d directory beside the shim's configuration
// (tools/packaging/kata-deploy/binary/src/artifacts/install.rs,
// install_default_runtime_drop_in). berth uses the same name so that an
// operator finds the override where kata-deploy put it.
const UserDropInName = "50-user-overrides.toml"

// CustomDropInName is the name kata-deploy gives a custom runtime's dropIn
// (install_custom_runtime_configs).
const CustomDropInName = "50-overrides.toml"

// Check refuses options that would make a configuration Kata cannot use,
// naming the option and what was expected: a drop-in key that p's Kata
// configuration does not have or a value of the wrong type, a proxy that is
// not a URL, an annotation Kata does not know.
func (o KataOptions) Check(p platform.Platform) error {
	if o.DropIn != nil {
		if err := CheckDropIn(p, o.DropInSource, o.DropIn); err != nil {
			return err
		}
	}
	if err := checkProxyURL(o.HTTPSProxy); err != nil {
		return fmt.Errorf("platform %s: agent https proxy %q: %w", p, o.HTTPSProxy, err)
	}
	if err := checkNoProxy(o.NoProxy); err != nil {
		return fmt.Errorf("platform %s: agent no-proxy %q: %w", p, o.NoProxy, err)
	}
	for _, a := range o.Annotations {
		if !slices.Contains(hypervisorAnnotations(), a) {
			return fmt.Errorf("platform %s: hypervisor annotation %q is not one of Kata %s's hypervisor annotations (io.katacontainers.config.hypervisor.<name>; expected a name such as default_memory, default_vcpus or kernel_params)", p, a, kataRelease)
		}
	}
	return nil
}

// kataRelease is the Kata release whose keys and annotations berth checks
// against (kata_upstream_gen.go, kataannotations.go).
const kataRelease = "4.1.0"

// checkProxyURL accepts an empty proxy or an http(s) URL with a host and
// nothing that would end the kernel parameter or the TOML string it goes in.
func checkProxyURL(s string) error {
	if s == "" {
		return nil
	}
	if strings.ContainsAny(s, " \t\"\\'") {
		return errors.New("expected a URL without spaces, quotes or backslashes (it becomes one guest kernel parameter)")
	}
	if err := platform.CheckText(s); err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("expected a URL such as http://proxy.example:3128: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "" {
		return errors.New("expected a URL such as http://proxy.example:3128 (scheme http or https, and a host)")
	}
	if port := u.Port(); port == "" && strings.HasSuffix(u.Host, ":") {
		return errors.New("expected a port after the colon")
	}
	return nil
}

// noProxyEntry is one entry of a no-proxy list: a host name, a domain
// (.example.com, *.example.com), an IP address or CIDR, optionally a port.
var noProxyEntry = regexp.MustCompile(`^(\*|\*?\.?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*|\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:.]+(/[0-9]{1,3})?)(:[0-9]{1,5})?$`)

func checkNoProxy(s string) error {
	if s == "" {
		return nil
	}
	for i, e := range strings.Split(s, ",") {
		if !noProxyEntry.MatchString(e) {
			return fmt.Errorf("entry %d %q: expected a comma-separated list of host names, domains, IP addresses or CIDRs, without spaces", i+1, e)
		}
	}
	return nil
}

// kernelParams are the guest kernel parameters o adds, in kata-deploy's
// order (generate_kernel_params_drop_in): proxy first, then no-proxy.
func (o KataOptions) kernelParams() []string {
	var out []string
	if o.HTTPSProxy != "" {
		out = append(out, "agent.https_proxy="+o.HTTPSProxy)
	}
	if o.NoProxy != "" {
		out = append(out, "agent.no_proxy="+o.NoProxy)
	}
	return out
}

// mergeAnnotations is enable_annotations with o's added, sorted and
// without repeats, as kata-deploy combines them
// (configure_hypervisor_annotations).
func mergeAnnotations(have any, add []string) []any {
	var all []string
	if list, ok := have.([]any); ok {
		for _, v := range list {
			if s, ok := v.(string); ok {
				all = append(all, s)
			}
		}
	}
	all = append(all, add...)
	slices.Sort(all)
	all = slices.Compact(all)
	out := make([]any, len(all))
	for i, s := range all {
		out[i] = s
	}
	return out
}

// kataDir is the directory of p's Kata configuration file.
func (ps Paths) kataDir(p platform.Platform) string { return path.Dir(ps.KataConfig(p)) }

// kataRoot is the directory every Kata configuration of ps goes under.
func (ps Paths) kataRoot() string {
	if ps.KataConfigDir != "" {
		return ps.KataConfigDir
	}
	return path.Join(ps.Prefix, "etc/kata")
}

// kataDropInFile is the config.d file of the operator's drop-in for p: its
// content is a header naming the source and the drop-in as given.
func kataDropInFile(p platform.Platform, ps Paths, o KataOptions) File {
	name := UserDropInName
	if ps.Custom != "" {
		name = CustomDropInName
	}
	var b bytes.Buffer
	// Not the source's name: the same overrides from another file are
	// the same file, and a re-apply changes nothing.
	what := "drop-in of the operator's overrides"
	for _, l := range strings.Split(strings.TrimRight(header(p, what+", merged by Kata's runtime over "+ps.KataConfig(p), nil), "\n"), "\n") {
		b.WriteString("# " + l + "\n")
	}
	b.WriteString("\n")
	b.Write(o.DropIn)
	if len(o.DropIn) > 0 && o.DropIn[len(o.DropIn)-1] != '\n' {
		b.WriteByte('\n')
	}
	return File{Path: strings.TrimPrefix(path.Join(ps.kataDir(p), "config.d", name), "/"), Kind: Owned, Format: "toml",
		Content: b.Bytes(), Purpose: "Kata configuration drop-in (" + name + ")"}
}

// MaxDropIn bounds a drop-in: Kata's largest configuration is some 40 KiB,
// and a drop-in overrides part of it.
const MaxDropIn = 256 << 10

// CheckDropIn refuses a drop-in that Kata's runtime would not apply as the
// operator meant: TOML that does not parse, a table or key that Kata's
// configuration for p's shim (the 4.1 template berth renders from) does
// not have, or a value whose type is not the template's. source names the
// drop-in in messages.
func CheckDropIn(p platform.Platform, source string, data []byte) error {
	if source == "" {
		source = "drop-in"
	}
	if len(data) > MaxDropIn {
		return fmt.Errorf("%s: %d bytes, expected at most %d (a drop-in overrides a few keys)", source, len(data), MaxDropIn)
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return fmt.Errorf("%s: line %d, column %d: %s: expected TOML", source, row, col, de.Error())
		}
		return fmt.Errorf("%s: %w", source, err)
	}
	keys := kataKeys(p, Paths{Prefix: DefaultPrefix}, KataOptions{})
	known := map[string]any{} // dotted key as written in the file -> template value
	tables := map[string]bool{}
	for _, k := range keys {
		t := strings.Join(kataTable(p, k.table), ".")
		known[t+"."+k.key] = k.value
		for i := range strings.Split(t, ".") {
			tables[strings.Join(strings.Split(t, ".")[:i+1], ".")] = true
		}
	}
	what := fmt.Sprintf("Kata's configuration for platform %s (%s)", p, p.KataConfigFile())
	var walk func(prefix string, m map[string]any) error
	walk = func(prefix string, m map[string]any) error {
		for _, name := range sortedKeys(m) {
			full := name
			if prefix != "" {
				full = prefix + "." + name
			}
			v := m[name]
			want, isKey := known[full]
			if sub, ok := v.(map[string]any); ok && !isKey {
				if !tables[full] {
					return fmt.Errorf("%s%s: table [%s] is not a table of %s (it has %s)", source, lineOf(data, name), full, what, tableList(tables))
				}
				if err := walk(full, sub); err != nil {
					return err
				}
				continue
			}
			if !isKey {
				return fmt.Errorf("%s%s: key %s is not a key of %s", source, lineOf(data, name), full, what)
			}
			if got, exp, ok := sameType(want, v); !ok {
				return fmt.Errorf("%s%s: key %s: expected %s, got %s", source, lineOf(data, name), full, exp, got)
			}
		}
		return nil
	}
	return walk("", doc)
}

// tableList names the tables of a configuration, for messages.
func tableList(tables map[string]bool) string {
	var out []string
	for t := range tables {
		if strings.Count(t, ".") >= 1 || t == "runtime" || t == "factory" {
			out = append(out, "["+t+"]")
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// lineOf finds the line that sets key, for messages: ", line N" or "".
func lineOf(data []byte, key string) string {
	re := regexp.MustCompile(`^\s*(\[+\s*)?([A-Za-z0-9_."-]+\.)?"?` + regexp.QuoteMeta(key) + `"?\s*(=|\]|\.)`)
	for i, l := range strings.Split(string(data), "\n") {
		if re.MatchString(l) {
			return fmt.Sprintf(", line %d", i+1)
		}
	}
	return ""
}

// sameType reports whether v (as go-toml decodes it) may stand where the
// template has want, with both type names for the message. An integer
// may stand for a float (Kata's TOML decoder converts it).
func sameType(want, v any) (got, exp string, ok bool) {
	exp, got = tomlType(want), tomlType(v)
	switch w := want.(type) {
	case float64:
		return got, exp, got == "a float" || got == "an integer"
	case []any:
		list, isList := v.([]any)
		if !isList {
			return got, exp, false
		}
		elem := "a string"
		if len(w) > 0 {
			elem = tomlType(w[0])
		}
		for _, e := range list {
			if tomlType(e) != elem {
				return "an array with " + tomlType(e), "an array of " + strings.TrimPrefix(strings.TrimPrefix(elem, "an "), "a ") + "s", false
			}
		}
		return got, exp, true
	case []map[string]any:
		return got, "an array of tables", false
	}
	return got, exp, got == exp
}

// tomlType names the TOML type of a decoded value.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64:
		return "an integer"
	case float64:
		return "a float"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	}
	return fmt.Sprintf("a %T", v)
}

// handler is the containerd/CRI-O handler of p under ps: the platform's
// (kata-deploy's name, suffixed), or the custom runtime's name.
func (ps Paths) handler(p platform.Platform) string {
	if ps.Custom != "" {
		return ps.Suffix.Of(ps.Custom)
	}
	return ps.Suffix.Handler(p)
}

// block names what berth writes for p under ps (files, blocks): the
// platform's name, or the custom runtime's.
func (ps Paths) block(p platform.Platform) string {
	if ps.Custom != "" {
		return ps.Suffix.Of(ps.Custom)
	}
	return ps.Suffix.Block(p)
}

// ErrBadKataOptions marks options refused before anything is read or
// written (a usage error at the command line).
var ErrBadKataOptions = errors.New("invalid Kata configuration options")

// handlerName is what Kubernetes accepts as a RuntimeClass handler and
// name (a DNS label), which a custom runtime's name becomes.
var handlerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// CheckCustomName refuses a custom runtime name that cannot be a
// RuntimeClass, handler and file name.
func CheckCustomName(name string) error {
	if len(name) > 63 || !handlerName.MatchString(name) {
		return fmt.Errorf("%w: custom runtime %q: expected at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit (it names the RuntimeClass, the handler and files)", ErrBadKataOptions, name)
	}
	return nil
}

// CustomRuntime is kata-deploy's customRuntimes entry: a handler of its
// own, Name (suffixed with the install's suffix), made from Platform's
// binaries and configuration with Kata's options (its drop-in).
type CustomRuntime struct {
	Name     string
	Platform platform.Platform
	Kata     KataOptions
}

// CustomHandlersOf lists the custom runtimes' handlers the state holds
// for platform p of the install of suffix s: removed with p.
func (st *State) CustomHandlersOf(p platform.Platform, s Suffix) []string {
	var out []string
	for _, h := range st.HandlersOf(s) {
		if st.Platforms[h].Platform == p.String() && h != s.Handler(p) {
			out = append(out, h)
		}
	}
	return out
}
