package catalog

import (
	"slices"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// containerRuntime returns the runtime the platform's distribution drives
// and its name.
func containerRuntime(f *facts.Facts, p platform.Platform) (*facts.ContainerRuntime, string) {
	if p.Distribution().Runtime() == platform.CRIO {
		return f.Runtimes.CRIO, "CRI-O"
	}
	return f.Runtimes.Containerd, "containerd"
}

// runtimeField is the Facts path of the platform's runtime.
func runtimeField(p platform.Platform) string {
	if p.Distribution().Runtime() == platform.CRIO {
		return "runtimes.crio"
	}
	return "runtimes.containerd"
}

func isContainerd(p platform.Platform) bool { return p.Distribution().Runtime() == platform.Containerd }

// runtimeReads returns a ReadsFor that declares fields of the platform's
// runtime ("configError" is "runtimes.containerd.configError" on a
// containerd platform). The lists are built once: ReadsFor runs for every
// platform.
func runtimeReads(fields ...string) func(p platform.Platform) []string {
	ctr, crio := make([]string, len(fields)), make([]string, len(fields))
	for i, f := range fields {
		ctr[i], crio[i] = "runtimes.containerd."+f, "runtimes.crio."+f
	}
	return func(p platform.Platform) []string {
		if isContainerd(p) {
			return ctr
		}
		return crio
	}
}

// platformHandler returns the runtime handler configured for p (named as
// kata-deploy and berth name it, kata-<shim>[-debug], or after the
// platform), or nil.
func platformHandler(f *facts.Facts, p platform.Platform) *facts.Handler {
	rt, _ := containerRuntime(f, p)
	if rt == nil || len(rt.Handlers) == 0 {
		// The usual state before berth install, and the evaluator asks
		// for every platform: Handler would build a string each time.
		return nil
	}
	name, kata := p.Name(), p.Handler()
	for i := range rt.Handlers {
		if rt.Handlers[i].Name == name || rt.Handlers[i].Name == kata {
			return &rt.Handlers[i]
		}
	}
	return nil
}

func runtimeChecks() []check.Check {
	return []check.Check{{
		ID:    "runtime.present",
		Title: "for the container runtime",
		Why:   "Kata plugs into the node's CRI runtime (containerd or CRI-O) as a runtime handler; without the runtime there is nothing to configure.",
		// The version only names the runtime in the message (runtime.version
		// judges it): an unknown version does not make the runtime unknown.
		ReadsFor:  runtimeReads("binary"),
		Platforms: "all",
		Remedies:  []string{"install the Kubernetes distribution first (kubeadm: install containerd; k3s/RKE2/k0s/microk8s ship their own)"},
		Applies:   check.Always(check.Blocking),
		Key:       keyDistribution,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			rt, name := containerRuntime(f, p)
			field := runtimeField(p)
			if rt == nil || rt.Binary == "" {
				return check.Failed(name+" not found", "install the Kubernetes distribution (or "+name+") first", check.Ev(field, "absent"))
			}
			return check.Ok(strings.TrimSpace(name+" "+rt.Version), check.Ev(field+".binary", rt.Binary), check.Ev(field+".version", rt.Version))
		},
	}, {
		ID:        "runtime.version",
		Title:     "for containerd >= 1.7",
		Why:       "A snapshotter per runtime handler (nydus for guest pull, devmapper for Firecracker) needs containerd 1.7 or newer.",
		Parent:    "runtime.present",
		Reads:     []string{"runtimes.containerd.version"},
		Platforms: "containerd platforms (blocking where the platform needs its own snapshotter)",
		Remedies:  []string{"upgrade containerd to 1.7 or newer (2.x recommended)"},
		Applies: func(p platform.Platform) (check.Severity, bool) {
			if !isContainerd(p) {
				return 0, false
			}
			if p.Snapshotter().Dedicated() {
				return check.Blocking, true
			}
			return check.Warning, true
		},
		Run: func(f *facts.Facts) check.Result {
			c := f.Runtimes.Containerd
			ev := check.Ev("runtimes.containerd.version", c.Version)
			v, ok := parseVersion(c.Version)
			switch {
			case !ok:
				return check.Unsure("containerd version not known", ev)
			case !v.atLeast(1, 7):
				return check.Failed("containerd "+v.String()+" has no snapshotter per handler (needs >= 1.7)", "upgrade containerd to 1.7 or newer", ev)
			}
			return check.Ok("containerd "+v.String(), ev)
		},
	}, {
		ID:     "runtime.config.parse",
		Title:  "if the runtime configuration parses",
		Why:    "berth adds the platform's handler to the runtime's configuration; a file that does not parse would also stop the runtime at its next restart.",
		Parent: "runtime.present",
		// A configuration berth could not read makes configError unknown
		// (with the read error as the reason): the result is then unknown,
		// never a failure whose remedy is to fix a syntax error.
		ReadsFor:  runtimeReads("configPath", "configExists", "configError"),
		Platforms: "all",
		Remedies:  []string{"fix the syntax error at the line and column reported, or restore the distribution's default configuration"},
		Applies:   check.Always(check.Blocking),
		Key:       keyDistribution,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			rt, name := containerRuntime(f, p)
			field := runtimeField(p)
			ev := []check.Evidence{check.Ev(field+".configPath", rt.ConfigPath), check.Ev(field+".configError", rt.ConfigError)}
			switch {
			case rt.ConfigError != "":
				return check.Failed(rt.ConfigPath+": "+rt.ConfigError, "fix the syntax error, or restore the default ("+strings.ToLower(name)+" config default)", ev...)
			case !rt.ConfigExists:
				return check.Ok("no configuration file yet: "+name+" runs on its defaults", check.Ev(field+".configExists", false))
			}
			return check.Ok(rt.ConfigPath+" parses", ev...)
		},
	}, {
		ID:     "runtime.config.path",
		Title:  "if the runtime reads the distribution's configuration",
		Why:    "Editing a file the runtime does not read (k3s's generated config.toml instead of its template, /etc/containerd on k3s) is the classic cause of \"no runtime for ... is configured\".",
		Parent: "runtime.present",
		// The template only names the file in the message.
		ReadsFor:  runtimeReads("configPath"),
		Platforms: "all (warning)",
		Remedies:  []string{"let berth write the distribution's file (template or drop-in); check the runtime's --config flag in its systemd unit"},
		Applies:   check.Always(check.Warning),
		Key:       keyDistribution,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			rt, _ := containerRuntime(f, p)
			field := runtimeField(p)
			lay, ok := p.Distribution().Layout()
			ev := []check.Evidence{check.Ev(field+".configPath", rt.ConfigPath)}
			if !ok {
				return check.Ok("custom distribution: configuration at "+orDefault(rt.ConfigPath, "the path given at install"), ev...)
			}
			if rt.ConfigPath != "" && strings.TrimPrefix(rt.ConfigPath, "/") != lay.Config {
				return check.Warned("the runtime reads "+rt.ConfigPath+", not "+p.Distribution().String()+"'s "+lay.Config,
					"check the runtime's --config flag; berth configures the file the runtime reads", ev...)
			}
			if lay.Template != "" {
				return check.Ok(lay.Config+" is generated; berth writes the template "+orDefault(rt.Template, lay.Template),
					append(ev, check.Ev(field+".template", rt.Template))...)
			}
			return check.Ok(lay.Config, ev...)
		},
	}, {
		ID:        "runtime.handler",
		Title:     "for the platform's runtime handler",
		Why:       "Pods select the platform through a RuntimeClass whose handler must be configured in the runtime; before berth install it is expected to be absent.",
		Parent:    "runtime.config.parse",
		ReadsFor:  runtimeReads("handlers"),
		Platforms: "all (warning when misconfigured; absent before install is fine)",
		Remedies:  []string{"berth install adds the handler and restarts the runtime"},
		Applies:   check.Always(check.Warning),
		// Platforms without a handler share one result per distribution
		// (the usual state before berth install); a configured handler is
		// judged for its own platform.
		KeyFacts: func(f *facts.Facts, p platform.Platform) platform.Spec {
			if platformHandler(f, p) == nil {
				return keyDistribution.Of(p.Spec())
			}
			return p.Spec()
		},
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			rt, _ := containerRuntime(f, p)
			field := runtimeField(p) + ".handlers"
			h := platformHandler(f, p)
			if h == nil {
				return check.Ok("the platform's handler is not configured yet: berth install adds it", check.Ev(field, handlerNames(rt)))
			}
			// Handlers are named by their name in a fact path, as binaries are.
			hf := field + "." + h.Name
			ev := []check.Evidence{check.Ev(hf+".runtimeType", h.RuntimeType), check.Ev(hf+".snapshotter", h.Snapshotter)}
			if isContainerd(p) && !strings.Contains(h.RuntimeType, "kata") {
				return check.Warned("handler "+h.Name+" has runtime_type "+h.RuntimeType+", not a Kata shim", "berth install rewrites it", ev...)
			}
			if want := p.Snapshotter(); isContainerd(p) && want.Dedicated() && h.Snapshotter != want.String() {
				return check.Warned("handler "+h.Name+" uses snapshotter "+orDefault(h.Snapshotter, "(default)")+", the platform needs "+want.String(), "berth install sets it", ev...)
			}
			return check.Ok("handler "+h.Name+" configured", ev...)
		},
	}, {
		ID:        "runtime.socket",
		Title:     "if the runtime is running",
		Why:       "berth restarts the runtime after configuring it and verifies the handler through the CRI socket.",
		Parent:    "runtime.present",
		ReadsFor:  runtimeReads("socket", "socketExists"),
		Platforms: "all (warning)",
		Remedies:  []string{"start the runtime (systemctl start containerd, or the distribution's service)"},
		Applies:   check.Always(check.Warning),
		Key:       keyDistribution,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			rt, name := containerRuntime(f, p)
			ev := check.Ev(runtimeField(p)+".socketExists", rt.SocketExists)
			if !rt.SocketExists {
				return check.Warned(name+" socket "+orDefault(rt.Socket, "")+" not found: the runtime is not running", "start the runtime's service", ev)
			}
			return check.Ok(rt.Socket, ev)
		},
	}}
}

func handlerNames(rt *facts.ContainerRuntime) []string {
	out := make([]string, 0, len(rt.Handlers))
	for _, h := range rt.Handlers {
		out = append(out, h.Name)
	}
	slices.Sort(out)
	return out
}
