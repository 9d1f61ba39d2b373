package cli

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// KataFlags are the operator's tuning of the Kata configuration per
// platform (kata-deploy's shims.<name>.dropIn, .agent.httpsProxy/noProxy
// and .allowedHypervisorAnnotations), each value KEY=VALUE where KEY is a
// platform (or a custom runtime's name): the same flags on config
// render/apply, install and the node-installer.
type KataFlags struct {
	DropIns, HTTPSProxies, NoProxies, Annotations []string
	// InlineDropIns are --kata-drop-in-toml PLATFORM=TOML: the drop-in
	// itself rather than a file (the chart passes it so).
	InlineDropIns []string
}

// Add adds the flags to cmd.
func (k *KataFlags) Add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringArrayVar(&k.DropIns, "kata-drop-in", nil, "PLATFORM=FILE: a TOML drop-in of Kata's configuration for the platform, checked against the keys its configuration has and written as config.d/50-user-overrides.toml beside it (repeatable)")
	f.StringArrayVar(&k.InlineDropIns, "kata-drop-in-toml", nil, "PLATFORM=TOML: as --kata-drop-in, with the drop-in's text itself (repeatable)")
	f.StringArrayVar(&k.HTTPSProxies, "agent-https-proxy", nil, "PLATFORM=URL: the HTTPS proxy of the Kata agent in the platform's guest (agent.https_proxy= on the guest kernel's command line; repeatable)")
	f.StringArrayVar(&k.NoProxies, "agent-no-proxy", nil, "PLATFORM=LIST: the Kata agent's no-proxy list (agent.no_proxy=; repeatable)")
	f.StringArrayVar(&k.Annotations, "allow-hypervisor-annotations", nil, "PLATFORM=NAME,...: hypervisor annotations pods may set, added to the platform's enable_annotations (Kata's names, e.g. default_memory; repeatable)")
}

// kataEntry is one KEY=VALUE of a flag.
type kataEntry struct{ flag, key, value string }

func (k KataFlags) entries() ([]kataEntry, error) {
	var out []kataEntry
	for _, f := range []struct {
		flag string
		vals []string
	}{{"--kata-drop-in", k.DropIns}, {"--kata-drop-in-toml", k.InlineDropIns}, {"--agent-https-proxy", k.HTTPSProxies}, {"--agent-no-proxy", k.NoProxies}, {"--allow-hypervisor-annotations", k.Annotations}} {
		for _, v := range f.vals {
			key, value, ok := strings.Cut(v, "=")
			if !ok || key == "" {
				return nil, UsageErr(fmt.Errorf("%s %q: expected PLATFORM=VALUE", f.flag, v))
			}
			out = append(out, kataEntry{f.flag, key, value})
		}
	}
	return out, nil
}

// For returns the options the flags give the platform p, or the custom
// runtime named custom when it is not empty. A key must name one of
// plats or customs, so that an option is never silently ignored; the
// options are checked (configure.KataOptions.Check): a bad one is a usage
// error (exit 2).
func (k KataFlags) For(p platform.Platform, custom string, plats []platform.Platform, customs []string) (configure.KataOptions, error) {
	es, err := k.entries()
	if err != nil {
		return configure.KataOptions{}, err
	}
	var o configure.KataOptions
	seen := map[string]bool{}
	for _, e := range es {
		q, perr := platform.Parse(e.key)
		switch {
		case slices.Contains(customs, e.key):
			if e.key != custom {
				continue
			}
		case perr == nil && slices.ContainsFunc(plats, func(x platform.Platform) bool { return x.String() == q.String() }):
			if custom != "" || q.String() != p.String() {
				continue
			}
		default:
			return o, UsageErr(fmt.Errorf("%s %s=...: %q is not a platform (or custom runtime) this command configures", e.flag, e.key, e.key))
		}
		once := e.flag
		if once == "--kata-drop-in-toml" {
			once = "--kata-drop-in" // one drop-in per platform, either way
		}
		if seen[once] {
			return o, UsageErr(fmt.Errorf("%s given twice for %s", once, e.key))
		}
		seen[once] = true
		switch e.flag {
		case "--kata-drop-in":
			data, err := readBounded(e.value, configure.MaxDropIn+1)
			if err != nil {
				return o, UsageErr(fmt.Errorf("--kata-drop-in %s=%s: %w", e.key, e.value, err))
			}
			o.DropIn, o.DropInSource = data, e.flag+" "+e.key+"="+e.value
		case "--kata-drop-in-toml":
			o.DropIn, o.DropInSource = []byte(e.value), "--kata-drop-in-toml "+e.key
		case "--agent-https-proxy":
			o.HTTPSProxy = e.value
		case "--agent-no-proxy":
			o.NoProxy = e.value
		case "--allow-hypervisor-annotations":
			for _, a := range strings.Split(e.value, ",") {
				if a = strings.TrimSpace(a); a != "" {
					o.Annotations = append(o.Annotations, a)
				}
			}
		}
	}
	if err := o.Check(p); err != nil {
		return o, UsageErr(err)
	}
	return o, nil
}

// ParseCustomRuntimes parses --custom-runtime values, each NAME=PLATFORM
// (kata-deploy's customRuntimes: a handler of its own made from a base
// platform and, with --kata-drop-in NAME=FILE, the operator's drop-in),
// with the Kata options k gives each. A name that cannot be a handler and
// RuntimeClass, a base platform not among plats and a bad option are
// refused (exit 2).
func (k KataFlags) ParseCustomRuntimes(vals []string, plats []platform.Platform) ([]configure.CustomRuntime, error) {
	var out []configure.CustomRuntime
	for _, v := range vals {
		name, base, ok := strings.Cut(v, "=")
		if !ok || name == "" || base == "" {
			return nil, UsageErr(fmt.Errorf("--custom-runtime %q: expected NAME=PLATFORM", v))
		}
		if err := configure.CheckCustomName(name); err != nil {
			return nil, UsageErr(err)
		}
		p, err := platform.Parse(base)
		if err != nil {
			return nil, UsageErr(fmt.Errorf("--custom-runtime %s: base platform: %w", name, err))
		}
		if !slices.ContainsFunc(plats, func(q platform.Platform) bool { return q.String() == p.String() }) {
			return nil, UsageErr(fmt.Errorf("--custom-runtime %s=%s: the base platform must be one of those installed (--platform), whose binaries the custom runtime runs", name, base))
		}
		if slices.ContainsFunc(out, func(c configure.CustomRuntime) bool { return c.Name == name }) {
			return nil, UsageErr(fmt.Errorf("--custom-runtime %s given twice", name))
		}
		out = append(out, configure.CustomRuntime{Name: name, Platform: p})
	}
	var names []string
	for _, c := range out {
		names = append(names, c.Name)
	}
	for i, c := range out {
		o, err := k.For(c.Platform, c.Name, plats, names)
		if err != nil {
			return nil, err
		}
		out[i].Kata = o
	}
	return out, nil
}

// PerPlatform returns the options the flags give each of plats (by
// platform.String()), for a command that configures several; customs are
// the names of its custom runtimes, whose options are their own.
func (k KataFlags) PerPlatform(plats []platform.Platform, customs []string) (map[string]configure.KataOptions, error) {
	out := map[string]configure.KataOptions{}
	for _, p := range plats {
		o, err := k.For(p, "", plats, customs)
		if err != nil {
			return nil, err
		}
		if !o.IsZero() {
			out[p.String()] = o
		}
	}
	return out, nil
}

// readBounded reads at most max bytes of file: a drop-in larger than
// configure.MaxDropIn is refused by its check, never read whole.
func readBounded(file string, max int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}
