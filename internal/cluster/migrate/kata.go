package migrate

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// kataShimKnob maps a shim's Kata tuning (shims.<name>.dropIn,
// .agent.httpsProxy/noProxy, .allowedHypervisorAnnotations) to berth's
// kata: values for the platform the shim became (the proxy for its debug
// twin too, as kata-deploy's debug runtimes have it), checked as the
// node-installer will check them, so that what would fail on the node is
// reported here.
func kataShimKnob(m *mapper, k knob, sub string, r shimResult) Knob {
	if r.why != "" {
		return unsupported(r.why)
	}
	var o configure.KataOptions
	var path func(p string) string
	var v any = k.n.v
	switch sub {
	case "dropIn":
		s, ok := k.n.v.(string)
		if !ok {
			return unsupported("expected the drop-in's TOML as a string")
		}
		o = configure.KataOptions{DropIn: []byte(s), DropInSource: "shims." + strings.SplitN(k.path, ".", 3)[1] + ".dropIn"}
		path = func(p string) string { return "kata.dropIns." + p }
	case "agent.httpsProxy", "agent.noProxy":
		s, ok := k.n.v.(string)
		if !ok {
			return unsupported("expected a string")
		}
		key := strings.TrimPrefix(sub, "agent.")
		if key == "httpsProxy" {
			o.HTTPSProxy = s
		} else {
			o.NoProxy = s
		}
		path = func(p string) string { return "kata.agentProxy." + p + "." + key }
	case "allowedHypervisorAnnotations":
		l, ok := k.n.v.([]any)
		if !ok {
			return unsupported("expected a list of annotation names")
		}
		var names []any
		for _, a := range l {
			s, ok := a.(string)
			if !ok {
				return unsupported("expected a list of annotation names")
			}
			// kata-deploy splits each entry on white space.
			for _, f := range strings.Fields(s) {
				o.Annotations = append(o.Annotations, f)
				names = append(names, f)
			}
		}
		v = names
		path = func(p string) string { return "kata.allowedHypervisorAnnotations." + p }
	default:
		return unsupported("not a kata-deploy 4.1 shim setting")
	}
	plats := r.platforms
	if o.HTTPSProxy == "" && o.NoProxy == "" {
		// kata-deploy's debug runtimes get their shim's kernel_params
		// (the proxy) but not its drop-in or annotations.
		plats = plats[:1]
	}
	var to []string
	for _, name := range plats {
		p, err := platform.Parse(name)
		if err != nil {
			return unsupported(err.Error())
		}
		if err := o.Check(p); err != nil {
			return unsupported("berth's node-installer would refuse it: " + err.Error())
		}
		to = append(to, m.set(path(name), v))
	}
	return mapped(strings.Join(to, ", "))
}

// customRuntimesKnob maps kata-deploy's customRuntimes.runtimes: each
// entry whose RuntimeClass names a handler becomes a kata.customRuntimes
// entry (the handler as its name, the platform its baseConfig shim became,
// its dropIn). An entry berth cannot make as kata-deploy would is named in
// an unsupported outcome; the others are still mapped.
func customRuntimesKnob(m *mapper, k knob, shims map[string]shimResult) Knob {
	if on, _ := m.merged.value("customRuntimes.enabled").(bool); !on {
		return notNeeded("customRuntimes.enabled is off: kata-deploy installs none of them")
	}
	rts, ok := k.n.v.(map[string]any)
	if !ok {
		return unsupported("expected a mapping of custom runtimes")
	}
	var out []any
	var to, bad []string
	for _, name := range slices.Sorted(maps.Keys(rts)) {
		e, _ := rts[name].(map[string]any)
		c, why := m.customRuntime(e, shims)
		if why != "" {
			bad = append(bad, name+": "+why)
			continue
		}
		out = append(out, c)
		to = append(to, fmt.Sprintf("%s (%s)", c["name"], c["platform"]))
	}
	if len(out) > 0 {
		m.set("kata.customRuntimes", out)
	}
	if len(bad) > 0 {
		return unsupported(strings.Join(bad, "; "))
	}
	return mapped("kata.customRuntimes: " + strings.Join(to, ", "))
}

// customRuntime is one kata.customRuntimes entry made from kata-deploy's
// entry e, or why there is none.
func (m *mapper) customRuntime(e map[string]any, shims map[string]shimResult) (map[string]any, string) {
	base, _ := e["baseConfig"].(string)
	rc, _ := e["runtimeClass"].(string)
	handler := ""
	for _, l := range strings.Split(rc, "\n") {
		if h, ok := strings.CutPrefix(strings.TrimSpace(l), "handler:"); ok {
			handler = strings.Trim(strings.TrimSpace(h), `"'`)
		}
	}
	switch {
	case handler == "":
		return nil, "its runtimeClass names no handler (kata-deploy skips it too)"
	case base == "":
		return nil, "no baseConfig"
	}
	if err := configure.CheckCustomName(handler); err != nil {
		return nil, err.Error()
	}
	r, ok := shims[base]
	if !ok || !r.enabled || len(r.platforms) == 0 {
		return nil, fmt.Sprintf("baseConfig %s is not an enabled shim: berth's custom runtime runs an installed platform's binaries (enable shims.%s)", base, base)
	}
	if r.why != "" {
		return nil, fmt.Sprintf("baseConfig %s: %s", base, r.why)
	}
	if s, _ := dig(e, "containerd", "snapshotter").(string); s != "" {
		return nil, "containerd.snapshotter: berth's custom runtime keeps its base platform's snapshotter (choose a shim with that snapshotter as baseConfig)"
	}
	if s, _ := dig(e, "crio", "pullType").(string); s != "" {
		return nil, "crio.pullType: a CRI-O setting; these platforms run containerd"
	}
	c := map[string]any{"name": handler, "platform": r.platforms[0]}
	if d, _ := e["dropIn"].(string); d != "" {
		p, err := platform.Parse(r.platforms[0])
		if err != nil {
			return nil, err.Error()
		}
		if err := configure.CheckDropIn(p, "dropIn", []byte(d)); err != nil {
			return nil, "berth's node-installer would refuse its drop-in: " + err.Error()
		}
		c["dropIn"] = d
	}
	return c, ""
}

func dig(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}
