package migrate

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"berth.dev/berth/internal/node/configure"
)

// The knobs of issue 41 items 3 and 4: RuntimeClass tuning, the default
// class and the node-installer's pod settings.

// runtimeClassKnob maps shims.<shim>.runtimeClass.overhead or .nodeSelector
// to runtimeClasses.overrides of each platform the shim installs (its debug
// twin too: kata-deploy's debug class reuses the shim's values).
func runtimeClassKnob(m *mapper, k knob, sub string, r shimResult) Knob {
	if r.why != "" {
		return unsupported(r.why)
	}
	raw, ok := k.n.v.(map[string]any)
	if !ok {
		return unsupported("expected a mapping")
	}
	vals := map[string]string{}
	for key, v := range raw {
		switch v.(type) {
		case string, int, int64, uint64, float64:
			vals[key] = fmt.Sprint(v)
		default:
			return unsupported(fmt.Sprintf("%s: expected a string or a number", key))
		}
	}
	var t configure.RuntimeClassTuning
	field := "overhead"
	if sub == "runtimeClass.overhead" {
		t.Overhead = vals
	} else {
		field = "nodeSelector"
		// kata-deploy drops its ownership key from a shim's selector;
		// berth selects on it already with kataDeploy.selectors.
		delete(vals, configure.KataDeployLabel)
		t.NodeSelector = vals
	}
	if err := t.Check(); err != nil {
		return unsupported(err.Error())
	}
	var to []string
	for _, p := range r.platforms {
		to = append(to, m.set("runtimeClasses.overrides."+p+"."+field, vals))
	}
	return mapped(strings.Join(to, ", "))
}

// defaultClassKnob decides runtimeClasses.createDefault, defaultName and
// defaultShim.amd64 together: kata-deploy's default class is a copy of the
// class of defaultShim's shim, named defaultName, never with a
// multiInstallSuffix.
func defaultClassKnob(m *mapper, k knob, shims map[string]shimResult) Knob {
	if on, _ := m.merged.value("runtimeClasses.createDefault").(bool); !on {
		return notNeeded("no default RuntimeClass is created (runtimeClasses.createDefault is off)")
	}
	if s, _ := m.merged.value("env.multiInstallSuffix").(string); s != "" {
		return notNeeded("kata-deploy creates no default RuntimeClass with env.multiInstallSuffix, and berth's chart refuses one with installSuffix")
	}
	shim, _ := m.merged.value("defaultShim.amd64").(string)
	r, known := shims[shim]
	switch {
	case !known:
		return unsupported(fmt.Sprintf("defaultShim.amd64 %q is not a kata-deploy 4.1 shim", shim))
	case !r.enabled:
		return unsupported(fmt.Sprintf("the default class is shim %s's (defaultShim.amd64), which is not enabled", shim))
	case r.why != "":
		return unsupported(fmt.Sprintf("the default class is shim %s's (defaultShim.amd64): %s", shim, r.why))
	}
	name, _ := m.merged.value("runtimeClasses.defaultName").(string)
	if err := configure.CheckDefaultClassName(name, nil); err != nil {
		return unsupported(err.Error())
	}
	m.set("runtimeClasses.createDefault", true)
	m.set("runtimeClasses.defaultPlatform", r.platforms[0])
	if name != configure.DefaultRuntimeClassName {
		m.set("runtimeClasses.defaultName", name)
	}
	switch k.path {
	case "runtimeClasses.createDefault":
		return mapped("runtimeClasses.createDefault")
	case "runtimeClasses.defaultName":
		return mapped("runtimeClasses.defaultName")
	}
	return mapped("runtimeClasses.defaultPlatform: " + r.platforms[0])
}

// startupTaint is an entry berth's chart takes (values.schema.json's
// nodeInstaller.startupTaints; the node-installer's ParseStartupTaint),
// matched here without linking the cluster code into berth.
var startupTaint = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?((=[A-Za-z0-9_.-]*)?:(NoSchedule|PreferNoSchedule|NoExecute))?$`)

// startupTaintsKnob maps the list, each entry KEY:EFFECT or a bare KEY,
// as berth's node-installer takes them.
func startupTaintsKnob(m *mapper, k knob, _ map[string]shimResult) Knob {
	l, ok := k.n.v.([]any)
	if !ok {
		return unsupported("expected a list of taints")
	}
	var taints []string
	for i, e := range l {
		s, _ := e.(string)
		if !startupTaint.MatchString(s) {
			return unsupported(fmt.Sprintf("entry %d %q: expected KEY[=VALUE]:EFFECT or a bare KEY (any effect), EFFECT NoSchedule, PreferNoSchedule or NoExecute", i, s))
		}
		taints = append(taints, s)
	}
	return mapped(m.set("nodeInstaller.startupTaints", taints))
}

// reservedPodLabels are the node-installer pod labels berth's chart sets
// itself.
var reservedPodLabels = []string{"app.kubernetes.io/name", "berth.dev/install-suffix"}

func podLabelsKnob(m *mapper, k knob, _ map[string]shimResult) Knob {
	l, ok := k.n.v.(map[string]any)
	if !ok {
		return unsupported("expected a mapping of labels")
	}
	out := maps.Clone(l)
	// kata-deploy ignores a "name" label (its DaemonSet's selector).
	delete(out, "name")
	for _, r := range reservedPodLabels {
		if _, set := out[r]; set {
			return unsupported(fmt.Sprintf("berth's chart sets the pod label %s itself (its DaemonSet selects on it)", r))
		}
	}
	if len(out) == 0 {
		return notNeeded("kata-deploy ignores a name label")
	}
	return mapped(m.set("nodeInstaller.podLabels", out))
}

func podAnnotationsKnob(m *mapper, k knob, _ map[string]shimResult) Knob {
	l, ok := k.n.v.(map[string]any)
	if !ok {
		return unsupported("expected a mapping of annotations")
	}
	if _, set := l["berth.dev/config-checksum"]; set {
		return unsupported("berth's chart sets the pod annotation berth.dev/config-checksum itself")
	}
	return mapped(m.set("nodeInstaller.podAnnotations", l))
}

func affinityKnob(m *mapper, k knob, _ map[string]shimResult) Knob {
	a, ok := k.n.v.(map[string]any)
	if !ok {
		return unsupported("expected a core/v1 Affinity")
	}
	for key := range a {
		if !slices.Contains([]string{"nodeAffinity", "podAffinity", "podAntiAffinity"}, key) {
			return unsupported(fmt.Sprintf("%s is not a field of a core/v1 Affinity", key))
		}
	}
	if mode, _ := m.merged.value("deploymentMode").(string); mode == "job" && a["nodeAffinity"] != nil {
		return unsupported("berth's job mode picks nodes by nodeInstaller.nodeSelector alone (match expressions are not taken there); use nodeSelector, or daemonset mode")
	}
	return mapped(m.set("nodeInstaller.affinity", a))
}

var maxUnavailable = regexp.MustCompile(`^([1-9][0-9]?%|100%)$`)

// updateStrategyKnob maps a rolling update; OnDelete and a surge are not
// berth's (the uninstall hook rolls cleanup out through the DaemonSet, and
// two node-installers must never share a node).
func updateStrategyKnob(m *mapper, k knob, _ map[string]shimResult) Knob {
	u, _ := k.n.v.(map[string]any)
	if t, _ := u["type"].(string); t != "RollingUpdate" {
		return unsupported(fmt.Sprintf("type %v: berth's node-installer rolls out only (its uninstall hook switches every pod to cleanup through a rolling update, which OnDelete would hold)", u["type"]))
	}
	ru, _ := u["rollingUpdate"].(map[string]any)
	if _, surge := ru["maxSurge"]; surge {
		return unsupported("maxSurge: two node-installers would run on one node at once")
	}
	mu := ru["maxUnavailable"]
	switch v := mu.(type) {
	case float64, int, int64, uint64:
		if n := fmt.Sprint(v); n == "0" || strings.HasPrefix(n, "-") || strings.Contains(n, ".") {
			return unsupported(fmt.Sprintf("maxUnavailable %v: expected 1 or more nodes, or a percentage", v))
		}
	case string:
		if !maxUnavailable.MatchString(v) {
			return unsupported(fmt.Sprintf("maxUnavailable %q: expected 1 or more nodes, or a percentage from 1%% to 100%%", v))
		}
	default:
		return unsupported("expected rollingUpdate.maxUnavailable")
	}
	return mapped(m.set("nodeInstaller.updateStrategy", map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": mu}}))
}

// userDropInKnob maps kata-deploy's containerd drop-in to the
// node-installer's, which writes it the same way: after berth's own, so
// that its keys win.
func userDropInKnob(m *mapper, k knob, _ map[string]shimResult) Knob {
	s, _ := k.n.v.(string)
	if err := configure.CheckUserDropIn("the drop-in", []byte(s)); err != nil {
		return unsupported(err.Error())
	}
	return mapped(m.set("nodeInstaller.containerdUserDropIn", s))
}
