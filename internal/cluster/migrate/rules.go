package migrate

import (
	"fmt"
	"strings"
)

// rule says what becomes of the knobs below a path pattern ("*" is one
// segment). The first rule that matches decides. Unless explicit, a knob
// set to kata-deploy's default is Default without asking the rule: berth's
// defaults behave as kata-deploy's there.
type rule struct {
	pattern  string
	explicit bool
	do       func(m *mapper, k knob, shims map[string]shimResult) Knob
}

func mapped(to string) Knob       { return Knob{Outcome: Mapped, To: to} }
func notNeeded(why string) Knob   { return Knob{Outcome: NotNeeded, Why: why} }
func unsupported(why string) Knob { return Knob{Outcome: Unsupported, Why: why} }
func fixed(o Knob) func(*mapper, knob, map[string]shimResult) Knob {
	return func(*mapper, knob, map[string]shimResult) Knob { return o }
}

// ifOn decides by a switch the files leave on or off: on when the merged
// value at path is true.
func ifOn(path string, on, off Knob) func(*mapper, knob, map[string]shimResult) Knob {
	return func(m *mapper, _ knob, _ map[string]shimResult) Knob {
		if v, _ := m.merged.value(path).(bool); v {
			return on
		}
		return off
	}
}

// to maps a knob to the berth value at path, as it is.
func to(path string) func(*mapper, knob, map[string]shimResult) Knob {
	return func(m *mapper, k knob, _ map[string]shimResult) Knob { return mapped(m.set(path, k.n.v)) }
}

const (
	whyOverhead = "berth's RuntimeClasses always reserve the pod overhead (the VM's memory and CPU outside the pod's containers); set a smaller one per platform with runtimeClasses.overrides.<platform>.overhead"
	whyJob      = "berth's job mode has no such setting: nodeInstaller.job has parallelism and one timeout for all nodes"
)

// rules cover every value of kata-deploy 4.1's values.yaml.
func rules() []rule {
	return []rule{
		{pattern: "shims.disableAll", do: fixed(mapped("platforms (which shims are enabled)"))},
		{pattern: "shims.*", explicit: true, do: shimKnob},
		{pattern: "deploymentMode", do: func(m *mapper, k knob, _ map[string]shimResult) Knob {
			if s, _ := k.n.v.(string); s == "daemonset" || s == "job" {
				return mapped(m.set("nodeInstaller.mode", s))
			}
			return unsupported("expected daemonset or job")
		}},
		{pattern: "job.parallelism", do: to("nodeInstaller.job.parallelism")},
		{pattern: "job.dispatcherImage", do: fixed(notNeeded("berth's dispatcher is berth's own image"))},
		{pattern: "job.nodes", do: fixed(unsupported("berth's job mode installs on the nodes nodeInstaller.nodeSelector selects; it takes no list of node names"))},
		{pattern: "job.cleanup", do: fixed(notNeeded("berth's cleanup visits every node that carries a berth.dev/installed.* label, wherever it was installed"))},
		{pattern: "job", do: fixed(unsupported(whyJob))},
		{pattern: "imagePullPolicy", do: to("image.pullPolicy")},
		{pattern: "imagePullSecrets", do: to("imagePullSecrets")},
		{pattern: "image", do: fixed(unsupported("berth installs Kata from a component manifest pinned by digest (nodeInstaller.manifest, `berth manifest`), not from kata-deploy's image"))},
		{pattern: "kubectlImage", do: fixed(notNeeded("berth labels nodes and removes taints from its own binary; it runs no kubectl image"))},
		{pattern: "monitor.enabled", do: fixed(unsupported("berth ships no kata-monitor; its agent serves /metrics of its own"))},
		{pattern: "monitor", do: ifOn("monitor.enabled", unsupported("berth ships no kata-monitor"), notNeeded("kata-monitor is not enabled"))},
		{pattern: "k8sDistribution", do: func(m *mapper, _ knob, _ map[string]shimResult) Knob {
			return mapped(fmt.Sprintf("platforms (distribution %s)", m.dist))
		}},
		{pattern: "containerd.runtimeSocket", do: func(m *mapper, k knob, _ map[string]shimResult) Knob {
			s, _ := k.n.v.(string)
			return mapped(m.set("nodeInstaller.runtimeSocket", strings.TrimPrefix(s, "unix://")))
		}},
		{pattern: "containerd.userDropIn", do: userDropInKnob},
		{pattern: "containerd", do: fixed(unsupported("berth takes containerd's config path only for platforms of the custom distribution (nodeInstaller.containerdConfig with custom-... platforms); the other distributions' paths are in its distribution table"))},
		{pattern: "nodeSelector", do: to("nodeInstaller.nodeSelector")},
		// berth's node-installer tolerates every taint by default; a file
		// that lists kata-deploy's (none) means to keep off tainted nodes.
		{pattern: "tolerations", explicit: true, do: to("nodeInstaller.tolerations")},
		{pattern: "startupTaints", do: startupTaintsKnob},
		{pattern: "podLabels", do: podLabelsKnob},
		{pattern: "podAnnotations", do: podAnnotationsKnob},
		{pattern: "affinity", do: affinityKnob},
		{pattern: "updateStrategy", do: updateStrategyKnob},
		{pattern: "priorityClassName", do: to("nodeInstaller.priorityClassName")},
		{pattern: "resources", do: to("nodeInstaller.resources")},
		{pattern: "debug", do: func(_ *mapper, k knob, _ map[string]shimResult) Knob {
			return mapped("platforms (each also with its +debug twin: the kata-<shim>-debug RuntimeClasses)")
		}},
		{pattern: "devkit", do: fixed(unsupported("berth installs no devkit guest extension"))},
		{pattern: "logLevel", do: fixed(unsupported("berth's chart has no log level"))},
		{pattern: "health.port", do: to("nodeInstaller.healthPort")},
		{pattern: "health", do: fixed(notNeeded("berth's node-installer has its own startup, readiness and liveness probes"))},
		{pattern: "snapshotter.setup", do: fixed(notNeeded("berth installs and configures the snapshotter each platform names (its +nydus/+erofs suffix or its default)"))},
		{pattern: "snapshotter", do: fixed(unsupported("berth configures EROFS with its own settings; merge mode, rw-layer backing and dm-verity are not values of its chart"))},
		{pattern: "defaultShim.amd64", do: defaultClassKnob},
		{pattern: "defaultShim", do: fixed(notNeeded("berth installs on x86_64 (amd64) nodes only: defaultShim.amd64 names the default class's shim"))},
		{pattern: "runtimeClasses.enabled", do: to("runtimeClasses.enabled")},
		{pattern: "runtimeClasses.createDefault", do: defaultClassKnob},
		{pattern: "runtimeClasses.defaultName", do: defaultClassKnob},
		{pattern: "runtimeClasses.overheadEnabled", do: fixed(unsupported(whyOverhead))},
		{pattern: "runtimeClasses", do: fixed(unsupported("not a kata-deploy 4.1 runtimeClasses value"))},
		{pattern: "env.installationPrefix", do: to("nodeInstaller.prefix")},
		{pattern: "env.multiInstallSuffix", do: to("installSuffix")},
		{pattern: "env.hostOS", do: fixed(notNeeded("berth discovers each node's operating system"))},
		{pattern: "node-feature-discovery", do: fixed(notNeeded("berth installs no NFD: its preflight checks virtualization (and the TEE) on every node before it installs"))},
		{pattern: "nodeFeatureRules.create", do: func(m *mapper, k knob, _ map[string]shimResult) Knob {
			if k.n.v == true || k.n.v == "true" {
				return mapped(m.set("nodeInstaller.advertiseTEEKeys", true))
			}
			return notNeeded("berth advertises no TEE keys unless nodeInstaller.advertiseTEEKeys is set")
		}},
		{pattern: "verification", do: fixed(notNeeded("berth's node-installer starts a sandbox on every installed handler before it labels the node"))},
		{pattern: "customRuntimes.enabled", do: func(m *mapper, k knob, _ map[string]shimResult) Knob {
			if rts, _ := m.merged.value("customRuntimes.runtimes").(map[string]any); k.n.v == true && len(rts) > 0 {
				return mapped("kata.customRuntimes (those of customRuntimes.runtimes)")
			}
			return notNeeded("no custom runtimes are listed (customRuntimes.runtimes)")
		}},
		{pattern: "customRuntimes.runtimes", do: customRuntimesKnob},
	}
}

// shimKnob decides a knob under shims.<name>.
func shimKnob(m *mapper, k knob, shims map[string]shimResult) Knob {
	parts := strings.SplitN(k.path, ".", 3)
	r, known := shims[parts[1]]
	if !known {
		return unsupported("not a kata-deploy 4.1 shim")
	}
	sub := ""
	if len(parts) == 3 {
		sub = parts[2]
	}
	unchanged := !k.changed()
	if sub == "enabled" {
		switch {
		case !r.enabled:
			return mapped("platforms (not listed)")
		case r.why != "":
			return unsupported(r.why)
		}
		return mapped("platforms: " + strings.Join(r.platforms, ", "))
	}
	if !r.enabled {
		if unchanged {
			return Knob{Outcome: Default}
		}
		return notNeeded("the shim is not enabled")
	}
	switch {
	case unchanged:
		return Knob{Outcome: Default}
	case sub == "containerd.snapshotter":
		if r.why != "" {
			return unsupported(r.why)
		}
		return mapped("platforms: " + r.platforms[0] + " (the snapshotter is part of the name)")
	case sub == "supportedArches":
		if r.why != "" {
			return unsupported(r.why)
		}
		return notNeeded("berth's preflight decides per node where each platform installs")
	case sub == "dropIn", sub == "allowedHypervisorAnnotations", strings.HasPrefix(sub, "agent."):
		return kataShimKnob(m, k, sub, r)
	case sub == "containerd.forceGuestPull":
		return unsupported("berth pulls in the guest exactly when the platform's snapshotter is nydus")
	case strings.HasPrefix(sub, "crio."):
		return notNeeded("a CRI-O setting; kata-deploy's distributions, and these platforms, run containerd")
	case sub == "runtimeClass.overhead", sub == "runtimeClass.nodeSelector":
		return runtimeClassKnob(m, k, sub, r)
	case sub == "runtimeClass.overheadEnabled":
		return unsupported(whyOverhead)
	}
	return unsupported("not a kata-deploy 4.1 shim setting")
}

// classify decides what becomes of one knob.
func (m *mapper) classify(k knob, shims map[string]shimResult) Knob {
	for _, r := range rules() {
		if match(r.pattern, k.path) == 0 {
			continue
		}
		if !r.explicit && !k.changed() {
			return Knob{Outcome: Default}
		}
		return r.do(m, k, shims)
	}
	if k.def == nil {
		return unsupported("not a kata-deploy 4.1 value")
	}
	return unsupported("berth has no counterpart")
}
