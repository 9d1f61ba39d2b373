package platform_test

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

// chartDir is kata-deploy's Helm chart in the upstream reference files (testdata/upstream).
var chartDir = []string{"kata-containers-4.1.0", "tools", "packaging", "kata-deploy", "helm-chart", "kata-deploy"}

// ChartShim is one entry of the chart's values.yaml `shims` map.
type ChartShim struct {
	SupportedArches []string `json:"supportedArches"`
	RuntimeClass    struct {
		NodeSelector map[string]string `json:"nodeSelector"`
	} `json:"runtimeClass"`
}

// chartShims reads kata-deploy's shim list from the real values.yaml.
func chartShims(t *testing.T) map[string]ChartShim {
	t.Helper()
	path := upstreamtest.Path(t, append(chartDir, "values.yaml")...)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Shims map[string]any `json:"shims"`
	}
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[string]ChartShim{}
	for name, raw := range v.Shims {
		if name == "disableAll" {
			continue
		}
		j, _ := yaml.Marshal(raw)
		var s ChartShim
		if err := yaml.Unmarshal(j, &s); err != nil {
			t.Fatalf("%s: shim %s: %v", path, name, err)
		}
		out[name] = s
	}
	if len(out) < 20 {
		t.Fatalf("%s: only %d shims read", path, len(out))
	}
	return out
}

// chartOverheads reads the per-shim overheads of the chart's
// runtimeclasses.yaml (the kata-deploy.runtimeClassConfigs dict) in MiB
// and millicores.
func chartOverheads(t *testing.T) map[string]platform.Overhead {
	t.Helper()
	path := upstreamtest.Path(t, append(chartDir, "templates", "runtimeclasses.yaml")...)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`"([a-z0-9-]+)" \(dict "memory" "(\d+)Mi" "cpu" "([0-9.]+)(m?)"\)`)
	out := map[string]platform.Overhead{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		mem, _ := strconv.Atoi(m[2])
		cpu, _ := strconv.ParseFloat(m[3], 64)
		if m[4] == "" {
			cpu *= 1000
		}
		out[m[1]] = platform.Overhead{MemoryMiB: mem, MilliCPU: int(cpu)}
	}
	if len(out) < 20 {
		t.Fatalf("%s: only %d overheads read", path, len(out))
	}
	return out
}

// TestChartShims walks kata-deploy 4.1's shim list: every x86_64 shim is
// exactly one berth platform (on a plain node, kubeadm; the -azure shims on
// AKS), which names the shim back, with the chart's RuntimeClass name,
// handler, debug class and pod overhead; every other shim is refused by
// the rule that says why.
func TestChartShims(t *testing.T) {
	shims := chartShims(t)
	overheads := chartOverheads(t)
	// Each shim's platform among the base platforms: default snapshotter
	// (but for coco-dev, which is QEMU's nydus variant), no product line
	// pin, no debug.
	byShim := map[string][]platform.Platform{}
	for _, p := range platform.All() {
		if p.Debug() || p.ProductLine() != platform.AnyProductLine ||
			(p.Snapshotter() != p.DefaultSnapshotter() && !strings.Contains(p.Shim(), "coco-dev")) ||
			(p.Distribution() != platform.Kubeadm && p.Distribution() != platform.AKS) || p.Shim() == "" {
			continue
		}
		byShim[p.Shim()] = append(byShim[p.Shim()], p)
	}
	for name, s := range shims {
		t.Run(name, func(t *testing.T) {
			p, err := platform.Parse("kata-" + name)
			if !slices.Contains(s.SupportedArches, "amd64") {
				var ve *platform.ValidationError
				if !errors.As(err, &ve) || ve.Rule.ID != "non-x86-shim" {
					t.Fatalf("kata-%s (arches %v) = %v, %v; want rule non-x86-shim", name, s.SupportedArches, p, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("kata-%s: %v", name, err)
			}
			if p.Shim() != name || p.KataRuntimeClass() != "kata-"+name || p.Handler() != "kata-"+name {
				t.Errorf("kata-%s = %s: shim %q class %q handler %q", name, p, p.Shim(), p.KataRuntimeClass(), p.Handler())
			}
			if got := byShim[name]; len(got) != 1 || got[0] != p {
				t.Errorf("shim %s is the base platform(s) %v, want exactly %s", name, got, p)
			}
			if (p.KataRuntime() == platform.RustRuntime) != (strings.HasSuffix(name, "-runtime-rs") || name == "dragonball") {
				t.Errorf("%s: runtime %s", name, p.KataRuntime())
			}
			d, err := platform.Parse("kata-" + name + "-debug")
			if err != nil || !d.Debug() || d.Shim() != name || d.KataRuntimeClass() != "kata-"+name+"-debug" {
				t.Errorf("kata-%s-debug = %v, %v", name, d, err)
			}
			if want, ok := overheads[name]; !ok || p.PodOverhead() != want {
				t.Errorf("%s: overhead %+v, chart %+v (listed %v)", name, p.PodOverhead(), want, ok)
			}
			sel := s.RuntimeClass.NodeSelector
			if got := p.ShimNodeSelector(); len(got) != len(sel) || !mapsEqual(got, sel) {
				t.Errorf("%s: shim node selector %v, chart %v", name, got, sel)
			}
		})
	}
	// And back: every shim berth names is one the chart ships (or, for
	// StratoVirt, one whose RuntimeClass overhead the chart defines: Kata
	// ships its configuration, kata-deploy lists no shim for it).
	for shim, ps := range byShim {
		if _, ok := shims[shim]; !ok {
			if _, ok := overheads[shim]; !ok {
				t.Errorf("berth names shim %s (%v), which kata-deploy does not ship", shim, ps)
			}
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}
