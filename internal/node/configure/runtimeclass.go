package configure

import (
	"fmt"
	"maps"
	"strings"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/platform"
)

// PlatformLabel is the node label berth's agent publishes on nodes that
// can run p; RuntimeClasses select on it.
func PlatformLabel(p platform.Platform) string { return "berth.dev/platform." + p.Name() }

// RuntimeClassOptions tune RuntimeClass.
type RuntimeClassOptions struct {
	// TEELabels also requires Node Feature Discovery's own cpu-security
	// label of p's TEE (feature.node.kubernetes.io/cpu-security.*).
	TEELabels bool
	// KataDeploy selects nodes the way kata-deploy's chart does: its
	// ownership label katacontainers.io/kata-runtime and the shim's own
	// node selector (the GPU operator's cc.ready.state for GPU shims), for
	// clusters where kata-deploy (or berth in its place) labels nodes.
	KataDeploy bool
	// NFD is kata-deploy's "NFD rules active": its NodeFeatureRule
	// publishes the TEE label (amd.feature.node.kubernetes.io/snp,
	// intel.feature.node.kubernetes.io/tdx) and the node's guest keys as
	// an extended resource; confidential classes select the label and
	// consume one key per sandbox through their overhead.
	NFD bool
	// Suffix names the class and its handler for a side-by-side install
	// (kata-qemu-snp-<suffix>) and labels it berth.dev/install-suffix.
	Suffix Suffix
	// Custom names the class and its handler after a custom runtime
	// (kata-deploy's customRuntimes) made from p.
	Custom string
	// Tuning is the operator's override of the class's overhead and node
	// selector (kata-deploy's shims.<shim>.runtimeClass); Check it first.
	Tuning RuntimeClassTuning
	// Name, when set, names the class instead of kata-deploy's name of the
	// shim, with the same handler: the cluster's default class
	// (kata-deploy's runtimeClasses.defaultName). Never with a Suffix.
	Name string
}

// KataDeployLabel is the label kata-deploy sets to "true" on nodes where it
// installed Kata; its RuntimeClasses select on it.
const KataDeployLabel = "katacontainers.io/kata-runtime"

type runtimeClassDoc struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   rcMeta         `json:"metadata"`
	Handler    string         `json:"handler"`
	Overhead   rcOverhead     `json:"overhead"`
	Scheduling map[string]any `json:"scheduling"`
}

type rcMeta struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

type rcOverhead struct {
	PodFixed map[string]string `json:"podFixed"`
}

// RuntimeClass renders the node.k8s.io/v1 RuntimeClass of p as YAML, with
// kata-deploy's name, handler and pod overhead (kata-<shim>[-debug]), so
// that pods written for kata-deploy's classes run unchanged, and a node
// selector on the label berth's agent publishes, so that pods never land
// on a node that cannot run them (a confidential GPU class also on the GPU
// operator's nvidia.com/cc.ready.state, as kata-deploy's). The options add kata-deploy's own
// selectors and TEE key accounting. The cluster agent reuses it.
func RuntimeClass(p platform.Platform, opt RuntimeClassOptions) []byte {
	o := p.PodOverhead()
	sel := map[string]string{PlatformLabel(p): "true"}
	maps.Copy(sel, p.ReadySelector())
	if l := p.TEE().NFDBuiltinLabel(); l != "" && opt.TEELabels {
		sel[l] = "true"
	}
	fixed := map[string]string{
		"memory": fmt.Sprintf("%dMi", o.MemoryMiB),
		"cpu":    fmt.Sprintf("%dm", o.MilliCPU),
	}
	if opt.KataDeploy {
		sel[KataDeployLabel] = "true"
		maps.Copy(sel, p.ShimNodeSelector())
	}
	if opt.NFD && p.Confidential() {
		// As the chart: a pure TEE class selects the TEE label (a GPU
		// class already does through its shim selector), and every TEE
		// class consumes one of the node's guest keys.
		if !p.GPU() {
			sel[p.TEE().NFDLabel()] = "true"
		}
		fixed[p.TEE().KeyResource()] = "1"
	}
	// The operator's values last: they win over berth's defaults, and
	// Check has kept them off berth's own keys and the TEE keys.
	maps.Copy(fixed, opt.Tuning.Overhead)
	maps.Copy(sel, opt.Tuning.NodeSelector)
	name := opt.Suffix.RuntimeClass(p)
	if opt.Custom != "" {
		name = opt.Suffix.Of(opt.Custom)
	}
	if opt.Name != "" {
		name = opt.Name
	}
	d := runtimeClassDoc{
		APIVersion: "node.k8s.io/v1",
		Kind:       "RuntimeClass",
		Metadata: rcMeta{Name: name, Labels: map[string]string{
			"app.kubernetes.io/managed-by": "berth",
			"berth.dev/platform":           p.Name(),
		}},
		Handler:    Paths{Suffix: opt.Suffix, Custom: opt.Custom}.handler(p),
		Overhead:   rcOverhead{PodFixed: fixed},
		Scheduling: map[string]any{"nodeSelector": sel},
	}
	if opt.Suffix != "" {
		d.Metadata.Labels[SuffixLabel] = string(opt.Suffix)
	}
	body, err := yaml.Marshal(d)
	if err != nil {
		// Only maps of strings: marshalling cannot fail.
		panic(fmt.Sprintf("configure: RuntimeClass: %v", err))
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(header(p, "RuntimeClass "+name, nil), "\n"), "\n") {
		b.WriteString("# " + l + "\n")
	}
	b.Write(body)
	return []byte(b.String())
}
