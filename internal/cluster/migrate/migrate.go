// Package migrate carries a kata-deploy 4.1 Helm configuration over to
// berth's chart: it merges kata-deploy values files as Helm does and maps
// every knob the user set to berth's chart values, or says why berth needs
// no such knob or cannot honour it. It reads no cluster and writes
// nothing: `berth migrate kata-deploy` prints what it returns.
package migrate

import (
	"bytes"
	_ "embed"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/platform"
)

// chartValues is kata-deploy 4.1.0's values.yaml, the defaults every
// values file is laid over (testdata/upstream/kata-containers-4.1.0 holds
// the same bytes with their provenance; TestEmbeddedDefaults compares).
//
//go:embed katadeploy-4.1.0-values.yaml
var chartValues []byte

// ChartName is how the report names kata-deploy's own defaults.
const ChartName = "kata-deploy 4.1.0 values.yaml"

// Outcome is what became of one knob.
type Outcome string

// The outcomes.
const (
	// Mapped: the knob became the berth value Knob.To.
	Mapped Outcome = "mapped"
	// NotNeeded: berth does by itself what the knob asks (Knob.Why).
	NotNeeded Outcome = "not needed"
	// Unsupported: berth cannot honour the knob (Knob.Why).
	Unsupported Outcome = "not supported"
	// Default: the knob is set to kata-deploy's default, which berth's
	// own default already behaves as: nothing to carry over.
	Default Outcome = "default"
)

// Knob is one kata-deploy value a file set, and what became of it.
type Knob struct {
	// Path is the value's dotted path in kata-deploy's chart
	// (shims.qemu-tdx.containerd.snapshotter).
	Path string `json:"path"`
	// File and Line are where the value that counts was set.
	File string `json:"file"`
	Line int    `json:"line"`
	// Outcome is what became of it.
	Outcome Outcome `json:"outcome"`
	// To is the berth value it became (Mapped).
	To string `json:"to,omitempty"`
	// Why says why it is not needed or not supported.
	Why string `json:"why,omitempty"`
}

// Input is one values file: its name (for messages) and its bytes.
type Input struct {
	Name string
	Data []byte
}

// Result is a migration: berth's chart values, and every knob.
type Result struct {
	// Values are berth chart values (deploy/helm/berth/values.yaml),
	// only those that differ from berth's defaults.
	Values map[string]any
	// Knobs are the kata-deploy values the files set, in the order of
	// kata-deploy's values.yaml.
	Knobs []Knob
	// Notes are values set for every migration, and what is left to the
	// user, one sentence each.
	Notes []string
}

// Unsupported are the knobs berth cannot honour.
func (r Result) Unsupported() []Knob {
	var out []Knob
	for _, k := range r.Knobs {
		if k.Outcome == Unsupported {
			out = append(out, k)
		}
	}
	return out
}

// KataDeploy merges the values files over kata-deploy 4.1.0's defaults,
// in order (later files win, as with helm -f a -f b), and maps them to
// berth's chart values. A malformed file is a usage error naming it and
// the line; unsupported knobs are not an error (Result.Unsupported).
func KataDeploy(files []Input) (Result, error) {
	defaults, err := parse(ChartName, chartValues)
	if err != nil {
		return Result{}, fmt.Errorf("kata-deploy's embedded values: %w", err)
	}
	merged := clone(defaults)
	var notes []string
	for _, f := range files {
		if bytes.Equal(f.Data, chartValues) {
			// helm -f of the chart's own values.yaml changes nothing.
			notes = append(notes, f.Name+" is kata-deploy 4.1.0's own values.yaml: its defaults are built in, and it sets nothing of its own.")
			continue
		}
		n, err := parse(f.Name, f.Data)
		if err != nil {
			return Result{}, err
		}
		merge(merged, n)
	}
	m := &mapper{defaults: defaults, merged: merged, values: map[string]any{}, notes: notes}
	if err := m.run(); err != nil {
		return Result{}, err
	}
	return Result{Values: m.values, Knobs: m.knobs, Notes: m.notes}, nil
}

type mapper struct {
	defaults, merged *node
	values           map[string]any
	knobs            []Knob
	notes            []string
	dist             platform.Distribution
}

// knob is one leaf the files set: its path, the node that set it, and
// kata-deploy's default (nil when kata-deploy has none).
type knob struct {
	path string
	n    *node
	def  *node
}

func (k knob) changed() bool {
	if k.def == nil {
		return true
	}
	return !reflect.DeepEqual(k.n.v, k.def.v)
}

func (m *mapper) run() error {
	var set []knob
	m.merged.leaves("", func(path string, n *node) {
		if n.file == ChartName {
			return
		}
		set = append(set, knob{path: path, n: n, def: m.defaults.get(path)})
	})
	dist, err := m.distribution()
	if err != nil {
		return err
	}
	m.dist = dist
	shimOut, err := m.shims()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(set, func(k knob) bool { return k.path == "tolerations" }) {
		m.notes = append(m.notes, "kata-deploy tolerates no taint unless told; berth's node-installer tolerates every taint (its preflight decides per node): set nodeInstaller.tolerations: [] to keep kata-deploy's choice of nodes.")
	}
	for _, k := range set {
		o := m.classify(k, shimOut)
		o.Path, o.File, o.Line = k.path, k.n.file, k.n.line
		m.knobs = append(m.knobs, o)
	}
	return nil
}

// distribution is k8sDistribution as a berth distribution.
func (m *mapper) distribution() (platform.Distribution, error) {
	n := m.merged.get("k8sDistribution")
	s, isString := n.v.(string)
	switch {
	case n.mapping() || !isString && n.v != nil:
		s = "?"
	case n.v == nil:
		s = ""
	}
	switch s {
	case "k8s", "":
		return platform.Kubeadm, nil
	case "k3s", "rke2", "k0s", "microk8s":
		return platform.ParseDistribution(s)
	}
	return 0, errdefs.Usagef("%s:%d: k8sDistribution: expected k8s, k3s, rke2, k0s or microk8s (kata-deploy 4.1's choices)", n.file, n.line)
}

func (m *mapper) set(path string, v any) string {
	cur := m.values
	ks := strings.Split(path, ".")
	for _, k := range ks[:len(ks)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	cur[ks[len(ks)-1]] = v
	return path
}

// shimResult is what became of one shim: the platforms it installs, or
// why it installs none.
type shimResult struct {
	enabled   bool
	platforms []string
	why       string // unsupported, when set
}

// shims computes the platforms the enabled shims are, and sets
// platforms.
func (m *mapper) shims() (map[string]shimResult, error) {
	out := map[string]shimResult{}
	all := m.merged.get("shims")
	if !all.mapping() {
		return nil, errdefs.Usagef("%s:%d: shims: expected a mapping of kata-deploy shims", all.file, all.line)
	}
	disableAll, _ := all.value("disableAll").(bool)
	debug, _ := m.merged.value("debug").(bool)
	var names []string
	for _, shim := range all.order {
		s := all.kids[shim]
		if shim == "disableAll" {
			continue
		}
		if !s.mapping() {
			return nil, errdefs.Usagef("%s:%d: shims.%s: expected a mapping of the shim's settings", s.file, s.line, shim)
		}
		var r shimResult
		switch e := s.get("enabled"); {
		case e == nil || e.v == nil:
			r.enabled = !disableAll
		default:
			r.enabled, _ = e.v.(bool)
		}
		if r.enabled {
			r.platforms, r.why = m.shimPlatforms(shim, s, debug)
			for _, p := range r.platforms {
				if !slices.Contains(names, p) {
					names = append(names, p)
				}
			}
		}
		out[shim] = r
	}
	if len(names) == 0 {
		return out, nil
	}
	m.set("platforms", names)
	// Workloads written for kata-deploy select its node labels.
	m.set("kataDeploy.selectors", true)
	m.set("nodeInstaller.kataDeployLabels", true)
	m.notes = append(m.notes,
		"kataDeploy.selectors and nodeInstaller.kataDeployLabels are set so that the RuntimeClasses select nodes as kata-deploy's do (katacontainers.io/kata-runtime, the GPU operator's cc.ready.state).",
		"nodeInstaller.manifest is required and not set: give the component manifest, pinned by digest (--set nodeInstaller.manifest=URL@sha256:HEX; `berth manifest`).")
	return out, nil
}

// shimPlatforms is the berth platform (and its debug twin) of an enabled
// shim, or why there is none.
func (m *mapper) shimPlatforms(shim string, s *node, debug bool) ([]string, string) {
	if a := s.get("supportedArches"); a != nil {
		if l, ok := a.v.([]any); ok && !slices.Contains(l, any("amd64")) {
			return nil, fmt.Sprintf("kata-deploy installs it on %s nodes only; berth installs on x86_64 (amd64) nodes", describe(l))
		}
	}
	p, err := platform.Parse("kata-" + shim)
	if err != nil {
		return nil, "not a shim berth knows: " + err.Error()
	}
	base := p.Spec()
	if sn := s.get("containerd.snapshotter"); sn != nil {
		name, _ := sn.v.(string)
		if name == "" {
			base.Snapshotter = platform.Overlayfs
		} else if snap, err := platform.ParseSnapshotter(name); err == nil {
			base.Snapshotter = snap
		} else {
			return nil, fmt.Sprintf("containerd.snapshotter: berth knows no such snapshotter (%v)", err)
		}
	}
	// The shim on k8sDistribution's distribution; else on the shim's own
	// (kata-deploy's -azure shims are AKS's, whatever the chart says).
	var (
		q    platform.Platform
		spec platform.Spec
		why  string
	)
	for _, d := range []platform.Distribution{m.dist, base.Distribution} {
		spec = base
		spec.Distribution = d
		c, err := platform.New(spec)
		switch {
		case err != nil:
			why = err.Error()
		case c.Shim() != shim:
			why = fmt.Sprintf("with that snapshotter berth's platform %s is kata-deploy's %s, not %s", c, c.Shim(), shim)
		default:
			q, why = c, ""
		}
		if why == "" {
			break
		}
	}
	if why != "" {
		return nil, why
	}
	out := []string{q.String()}
	if debug {
		spec.Debug = true
		if d, err := platform.New(spec); err == nil {
			out = append(out, d.String())
		}
	}
	return out, ""
}
