package configure

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/platform"
)

// PlatformLabel is the node label berth's agent publishes on nodes that
// can run p; RuntimeClasses select on it.
func PlatformLabel(p platform.Platform) string { return "berth.dev/platform." + p.Name() }

// RuntimeClassOptions tune RuntimeClass.
type RuntimeClassOptions struct {
	// TEELabels also requires the Node Feature Discovery labels of p's
	// TEE, for clusters that run NFD alongside or instead of berth's agent.
	TEELabels bool
}

// nfdTEELabels are NFD's cpu-security labels per TEE.
var nfdTEELabels = map[platform.TEE]string{
	platform.SNP: "feature.node.kubernetes.io/cpu-security.sev.snp.enabled",
	platform.TDX: "feature.node.kubernetes.io/cpu-security.tdx.enabled",
}

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

// RuntimeClass renders the node.k8s.io/v1 RuntimeClass of p as YAML: the
// handler berth configures, the platform's pod overhead, and a node
// selector on the label berth's agent publishes, so that pods never land on
// a node that cannot run them. The cluster agent reuses it.
func RuntimeClass(p platform.Platform, opt RuntimeClassOptions) []byte {
	o := p.PodOverhead()
	sel := map[string]string{PlatformLabel(p): "true"}
	if l, ok := nfdTEELabels[p.TEE()]; ok && opt.TEELabels {
		sel[l] = "true"
	}
	d := runtimeClassDoc{
		APIVersion: "node.k8s.io/v1",
		Kind:       "RuntimeClass",
		Metadata: rcMeta{Name: p.Name(), Labels: map[string]string{
			"app.kubernetes.io/managed-by": "berth",
			"berth.dev/platform":           p.Name(),
		}},
		Handler: p.Name(),
		Overhead: rcOverhead{PodFixed: map[string]string{
			"memory": fmt.Sprintf("%dMi", o.MemoryMiB),
			"cpu":    fmt.Sprintf("%dm", o.MilliCPU),
		}},
		Scheduling: map[string]any{"nodeSelector": sel},
	}
	body, err := yaml.Marshal(d)
	if err != nil {
		// Only maps of strings: marshalling cannot fail.
		panic(fmt.Sprintf("configure: RuntimeClass: %v", err))
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(header(p, "RuntimeClass "+p.Name(), nil), "\n"), "\n") {
		b.WriteString("# " + l + "\n")
	}
	b.Write(body)
	return []byte(b.String())
}
