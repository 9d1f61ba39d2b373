package configure_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

// chartRuntimeClass is what kata-deploy's runtimeclasses.yaml renders for
// one shim with the chart's default values (no multiInstallSuffix, no
// per-shim overrides), written out field by field from that template:
// name and handler kata-<shim>[-debug]; overhead from the shim's dict
// entry plus one TEE key when kata-deploy's NFD rules are active; node
// selector katacontainers.io/kata-runtime plus the shim's values.yaml
// nodeSelector, or, when NFD is in use and the shim is a pure TEE shim
// without one, the TEE's NFD label.
type chartRuntimeClass struct {
	name, handler string
	overhead      map[string]string
	selector      map[string]string
}

func renderChart(t *testing.T, shim string, debug, nfd bool, mem, cpu string, shimSel map[string]string) chartRuntimeClass {
	t.Helper()
	name := "kata-" + shim
	if debug {
		name += "-debug"
	}
	rc := chartRuntimeClass{name: name, handler: name,
		overhead: map[string]string{"memory": mem, "cpu": cpu},
		selector: map[string]string{"katacontainers.io/kata-runtime": "true"}}
	if nfd {
		if strings.Contains(shim, "snp") {
			rc.overhead["sev-snp.amd.com/esids"] = "1"
		}
		if strings.Contains(shim, "tdx") {
			rc.overhead["tdx.intel.com/keys"] = "1"
		}
	}
	pureTEE := (strings.Contains(shim, "snp") || strings.Contains(shim, "tdx")) && !strings.Contains(shim, "nvidia-gpu")
	switch {
	case len(shimSel) > 0:
		for k, v := range shimSel {
			rc.selector[k] = v
		}
	case nfd && pureTEE:
		if strings.Contains(shim, "snp") {
			rc.selector["amd.feature.node.kubernetes.io/snp"] = "true"
		}
		if strings.Contains(shim, "tdx") {
			rc.selector["intel.feature.node.kubernetes.io/tdx"] = "true"
		}
	}
	return rc
}

// TestRuntimeClassesMatchKataDeploy compares berth's RuntimeClass of every
// x86_64 kata-deploy shim (and its debug class), with and without NFD,
// with what kata-deploy 4.1's chart renders for it: name, handler,
// overhead (as quantities) and node selector, where berth's selector is
// the chart's plus berth's own platform label.
func TestRuntimeClassesMatchKataDeploy(t *testing.T) {
	chart := []string{"kata-containers-4.1.0", "tools", "packaging", "kata-deploy", "helm-chart", "kata-deploy"}
	vb, err := os.ReadFile(upstreamtest.Path(t, append(chart, "values.yaml")...))
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Shims map[string]any `json:"shims"`
	}
	if err := yaml.Unmarshal(vb, &raw); err != nil {
		t.Fatal(err)
	}
	type shimValues struct {
		SupportedArches []string `json:"supportedArches"`
		RuntimeClass    struct {
			NodeSelector map[string]string `json:"nodeSelector"`
		} `json:"runtimeClass"`
	}
	var values struct{ Shims map[string]shimValues }
	values.Shims = map[string]shimValues{}
	for name, r := range raw.Shims {
		if _, ok := r.(map[string]any); !ok {
			continue // disableAll
		}
		j, _ := yaml.Marshal(r)
		var v shimValues
		if err := yaml.Unmarshal(j, &v); err != nil {
			t.Fatalf("values.yaml shims.%s: %v", name, err)
		}
		values.Shims[name] = v
	}
	tb, err := os.ReadFile(upstreamtest.Path(t, append(chart, "templates", "runtimeclasses.yaml")...))
	if err != nil {
		t.Fatal(err)
	}
	dict := map[string][2]string{}
	for _, m := range regexp.MustCompile(`"([a-z0-9-]+)" \(dict "memory" "([^"]+)" "cpu" "([^"]+)"\)`).FindAllStringSubmatch(string(tb), -1) {
		dict[m[1]] = [2]string{m[2], m[3]}
	}
	n := 0
	for shim, v := range values.Shims {
		if !slices.Contains(v.SupportedArches, "amd64") {
			continue
		}
		for _, debug := range []bool{false, true} {
			for _, nfd := range []bool{false, true} {
				in := "kata-" + shim
				if debug {
					in += "-debug"
				}
				p, err := platform.Parse(in)
				if err != nil {
					t.Errorf("%s: %v", in, err)
					continue
				}
				want := renderChart(t, shim, debug, nfd, dict[shim][0], dict[shim][1], v.RuntimeClass.NodeSelector)
				want.selector[configure.PlatformLabel(p)] = "true"
				var got struct {
					Metadata struct{ Name string }
					Handler  string
					Overhead struct {
						PodFixed map[string]string `json:"podFixed"`
					}
					Scheduling struct {
						NodeSelector map[string]string `json:"nodeSelector"`
					}
				}
				doc := configure.RuntimeClass(p, configure.RuntimeClassOptions{KataDeploy: true, NFD: nfd})
				if err := yaml.Unmarshal(doc, &got); err != nil {
					t.Fatalf("%s: %v\n%s", in, err, doc)
				}
				if got.Metadata.Name != want.name || got.Handler != want.handler {
					t.Errorf("%s (nfd %v): name %q handler %q, chart %q %q", in, nfd, got.Metadata.Name, got.Handler, want.name, want.handler)
				}
				if !sameQuantities(got.Overhead.PodFixed, want.overhead) {
					t.Errorf("%s (nfd %v): overhead %v, chart %v", in, nfd, got.Overhead.PodFixed, want.overhead)
				}
				if !equalMaps(got.Scheduling.NodeSelector, want.selector) {
					t.Errorf("%s (nfd %v): node selector %v, chart + berth %v", in, nfd, got.Scheduling.NodeSelector, want.selector)
				}
				n++
			}
		}
	}
	if n < 80 {
		t.Errorf("compared %d RuntimeClasses; the chart has more x86_64 shims than that", n)
	}
}

func sameQuantities(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok {
			return false
		}
		x, err1 := resource.ParseQuantity(v)
		y, err2 := resource.ParseQuantity(w)
		if err1 != nil || err2 != nil || x.Cmp(y) != 0 {
			return false
		}
	}
	return true
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
