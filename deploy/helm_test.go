package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/goldenfile"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/platform"
)

// The chart, relative to this package's directory, and the release the
// tests render it as: named berth in berth-system, as the README installs
// it, so that its object names are the kustomize base's.
const (
	chartDir     = "helm/berth"
	releaseName  = "berth"
	releaseNS    = "berth-system"
	helmEnv      = "BERTH_HELM"
	helmHint     = "run `make tools` (or `bash .ci/helm.sh` and `. .ci/tools.env`): .ci/helm.sh builds helm from tools/helm into ~/.cache/berth/bin"
	platformFile = chartDir + "/files/platforms.json"
	schemaFile   = chartDir + "/values.schema.json"
	chartCRDFile = chartDir + "/files/crd-nodereport.yaml"
)

// helmPath returns the helm binary BERTH_HELM names; the chart tests fail,
// never skip, without it.
func helmPath(t *testing.T) string {
	t.Helper()
	testkit.NeedsTools(t, "helm (BERTH_HELM)")
	p := os.Getenv(helmEnv)
	if p == "" {
		t.Fatalf("%s is not set: %s", helmEnv, helmHint)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("%s=%s is not an executable file (%v): %s", helmEnv, p, err, helmHint)
	}
	return p
}

// runHelm runs helm with its configuration, cache and data directories in a
// temporary directory (never the user's), returning stdout and, on failure,
// an error carrying stderr.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	home := t.TempDir()
	c, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(c, helmPath(t), args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"HOME="+home,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// renderChart is `helm template` of the chart as release berth in
// berth-system with extra arguments (--set, -f).
func renderChart(t *testing.T, extra ...string) (string, error) {
	t.Helper()
	return runHelm(t, append([]string{"template", releaseName, chartDir, "--namespace", releaseNS}, extra...)...)
}

func mustRender(t *testing.T, extra ...string) string {
	t.Helper()
	out, err := renderChart(t, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeObjects splits a multi-document YAML stream into objects, skipping
// empty documents.
func decodeObjects(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decoding rendered objects: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// classRow is one RuntimeClass's data in the chart's files/platforms.json:
// what configure.RuntimeClass reads from the platform model, with the
// option-dependent parts precomputed so that the template only picks them.
// Every platform of a class has the same row (platformTable checks it), so
// the table maps platforms to classes and classes to rows: a sixth of the
// size of a row per platform.
type classRow struct {
	// Handler is the containerd or CRI-O runtime handler.
	Handler string `json:"handler"`
	// CPU, Memory: kata-deploy's pod overhead for the shim.
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
	// TEELabel is NFD's own cpu-security label (runtimeClasses.teeLabels).
	TEELabel string `json:"teeLabel,omitempty"`
	// Ready is the selector every class of the platform carries
	// (platform.ReadySelector: the GPU operator's cc.ready.state for
	// confidential GPU classes).
	Ready map[string]string `json:"ready,omitempty"`
	// ShimSelector is kata-deploy's per-shim node selector
	// (kataDeploy.selectors).
	ShimSelector map[string]string `json:"shimSelector,omitempty"`
	// NFDLabel and KeyResource apply with kataDeploy.nfd: the TEE label a
	// pure TEE class selects and the TEE key every TEE class consumes.
	NFDLabel    string `json:"nfdLabel,omitempty"`
	KeyResource string `json:"keyResource,omitempty"`
}

func rowOf(p platform.Platform) classRow {
	o := p.PodOverhead()
	r := classRow{
		Handler:      p.Handler(),
		CPU:          fmt.Sprintf("%dm", o.MilliCPU),
		Memory:       fmt.Sprintf("%dMi", o.MemoryMiB),
		TEELabel:     p.TEE().NFDBuiltinLabel(),
		Ready:        p.ReadySelector(),
		ShimSelector: p.ShimNodeSelector(),
	}
	if p.Confidential() {
		if !p.GPU() {
			r.NFDLabel = p.TEE().NFDLabel()
		}
		r.KeyResource = p.TEE().KeyResource()
	}
	return r
}

// platformTable renders files/platforms.json: "platforms" maps every
// canonical name (All's order, one per line, so that a change to the model
// reads as a short diff) to its RuntimeClass name, "classes" each class to
// its row. The template derives the label name (platform.Name()) from the
// canonical name by turning '+' into '-'; the table is refused if the
// model ever names labels otherwise.
func platformTable(t *testing.T) []byte {
	t.Helper()
	rows := map[string]classRow{}
	var b bytes.Buffer
	b.WriteString("{\n  \"platforms\": {\n")
	for i, p := range platform.All() {
		if want := strings.ReplaceAll(p.String(), "+", "-"); p.Name() != want {
			t.Fatalf("platform %s: Name() is %q, not %q as the chart derives it: store the label in the table", p, p.Name(), want)
		}
		if label := configure.Suffix("").InstalledLabel(p); len(strings.TrimPrefix(label, v1alpha1.LabelPrefix)) > 63 {
			t.Fatalf("platform %s: label %s is longer than a label name may be", p, label)
		}
		class, row := p.KataRuntimeClass(), rowOf(p)
		if prev, ok := rows[class]; ok && !reflect.DeepEqual(prev, row) {
			t.Fatalf("RuntimeClass %s: platform %s has %+v, another platform of the class %+v: key the table by platform", class, p, row, prev)
		}
		rows[class] = row
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "    %s: %s", mustJSON(t, p.String()), mustJSON(t, class))
	}
	b.WriteString("\n  },\n  \"classes\": {\n")
	for i, class := range slices.Sorted(maps.Keys(rows)) {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "    %s: %s", mustJSON(t, class), mustJSON(t, rows[class]))
	}
	b.WriteString("\n  }\n}\n")
	return b.Bytes()
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// enumLine matches the $comment line of values.schema.json after which the
// generated platform enum sits, on one line.
var enumLine = regexp.MustCompile(`(?m)^(\s*"\$comment": "enum: generated from platform\.All\(\)[^"]*",\n\s*"enum": )\[[^\n]*\]$`)

// schemaWithPlatforms returns values.schema.json with its platform enum
// set to every canonical platform name.
func schemaWithPlatforms(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(enumLine.FindAllIndex(raw, -1)); n != 1 {
		t.Fatalf("%s: found the generated platform enum %d times, want once", schemaFile, n)
	}
	var names []string
	for _, p := range platform.All() {
		names = append(names, p.String())
	}
	enum, err := json.Marshal(names)
	if err != nil {
		t.Fatal(err)
	}
	out := enumLine.ReplaceAllFunc(raw, func(m []byte) []byte {
		head := enumLine.FindSubmatch(m)[1]
		return append(append([]byte{}, head...), enum...)
	})
	if !json.Valid(out) {
		t.Fatalf("%s is not valid JSON after setting the platform enum", schemaFile)
	}
	return out
}

// TestChartGenerated keeps the chart's generated files equal to what
// berth's own code produces: the platform table, the schema's platform
// enum and the NodeReport CRD. `go test ./deploy -run TestChartGenerated
// -update` rewrites them.
func TestChartGenerated(t *testing.T) {
	crd, err := os.ReadFile(filepath.Join("base", "crd-nodereport.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	goldenfile.Assert(t, platformFile, platformTable(t))
	goldenfile.Assert(t, schemaFile, schemaWithPlatforms(t))
	goldenfile.Assert(t, chartCRDFile, crd)
}

// rcOptions is one combination of the RuntimeClass options, as chart
// values and as configure's options.
type rcOptions struct {
	name string
	set  []string
	opt  configure.RuntimeClassOptions
}

var rcOptionSets = []rcOptions{
	{"plain", nil, configure.RuntimeClassOptions{}},
	{"kata-deploy", []string{"kataDeploy.selectors=true"}, configure.RuntimeClassOptions{KataDeploy: true}},
	{"nfd", []string{"kataDeploy.nfd=true"}, configure.RuntimeClassOptions{NFD: true}},
	{"all", []string{"kataDeploy.selectors=true", "kataDeploy.nfd=true", "runtimeClasses.teeLabels=true"},
		configure.RuntimeClassOptions{KataDeploy: true, NFD: true, TEELabels: true}},
	// A side-by-side release: its names are those of berth's one install
	// target of that suffix (configure.Install), handler and installed
	// label included.
	{"suffix", []string{"installSuffix=blue"}, configure.RuntimeClassOptions{Suffix: "blue"}},
}

// classGroups partitions every platform into groups whose RuntimeClass
// names differ, so that each group renders in one `helm template` (a chart
// refuses two platforms of one class, as the CLI does).
func classGroups() [][]platform.Platform {
	var groups [][]platform.Platform
	var used []map[string]bool
	for _, p := range platform.All() {
		i := slices.IndexFunc(used, func(m map[string]bool) bool { return !m[p.KataRuntimeClass()] })
		if i < 0 {
			groups, used = append(groups, nil), append(used, map[string]bool{})
			i = len(groups) - 1
		}
		groups[i] = append(groups[i], p)
		used[i][p.KataRuntimeClass()] = true
	}
	return groups
}

// classSpec is the part of a RuntimeClass the chart and the CLI must agree
// on: everything but the labels Helm adds.
type classSpec struct {
	Name, Handler, Platform string
	Overhead, Selector      map[string]string
}

func specOf(t *testing.T, u *unstructured.Unstructured) classSpec {
	t.Helper()
	str := func(fields ...string) map[string]string {
		m, _, err := unstructured.NestedStringMap(u.Object, fields...)
		if err != nil {
			t.Fatalf("RuntimeClass %s: %v", u.GetName(), err)
		}
		return m
	}
	handler, _, _ := unstructured.NestedString(u.Object, "handler")
	return classSpec{Name: u.GetName(), Handler: handler, Platform: u.GetLabels()["berth.dev/platform"],
		Overhead: str("overhead", "podFixed"), Selector: str("scheduling", "nodeSelector")}
}

// TestChartRuntimeClasses renders RuntimeClasses with the chart and
// compares them with configure.RuntimeClass, which is what `berth
// runtimeclasses` prints, for the same platforms and options. The first
// group holds one platform of every class, and a class's data does not
// depend on which of its platforms chose it (TestChartGenerated checks
// that, and pins the platform-to-class table), so it is rendered with every
// option set, with and without the node-installer; a sample of the other
// groups checks the label and class lookup of the remaining platforms.
// With the node-installer enabled the only difference is the node
// selector's berth key: installed there, not merely able to run.
func TestChartRuntimeClasses(t *testing.T) {
	groups := classGroups()
	type render struct {
		group     int
		opts      rcOptions
		installer bool
	}
	var renders []render
	for _, o := range rcOptionSets {
		renders = append(renders, render{0, o, false}, render{0, o, true})
	}
	for gi := 7; gi < len(groups); gi += 11 {
		renders = append(renders, render{gi, rcOptionSets[gi%len(rcOptionSets)], gi%2 == 0})
	}
	t.Logf("%d platforms, %d classes; %d renderings", len(platform.All()), len(groups[0]), len(renders))
	for _, r := range renders {
		g := groups[r.group]
		t.Run(fmt.Sprintf("group %d/%s/installer=%v", r.group, r.opts.name, r.installer), func(t *testing.T) {
			args := []string{"--set", fmt.Sprintf("nodeInstaller.enabled=%v", r.installer),
				"--set", "nodeInstaller.manifest=https://example.com/m.json@sha256:" + strings.Repeat("0", 64),
				"--show-only", "templates/runtimeclasses.yaml"}
			for _, s := range r.opts.set {
				args = append(args, "--set", s)
			}
			var names []string
			custom := false
			for _, p := range g {
				names = append(names, p.String())
				custom = custom || p.Distribution() == platform.Custom
			}
			args = append(args, "--set-json", "platforms="+string(mustJSON(t, names)))
			if custom && r.installer {
				// The node-installer needs the custom distribution's paths.
				args = append(args, "--set", "nodeInstaller.runtimeUnit=containerd.service", "--set", "nodeInstaller.containerdConfig=/etc/containerd/config.toml")
			}
			got := map[string]classSpec{}
			for _, u := range decodeObjects(t, mustRender(t, args...)) {
				s := specOf(t, u)
				got[s.Platform] = s
			}
			if len(got) != len(g) {
				t.Fatalf("%d RuntimeClasses for %d platforms", len(got), len(g))
			}
			for _, p := range g {
				var u unstructured.Unstructured
				if err := yaml.Unmarshal(configure.RuntimeClass(p, r.opts.opt), &u.Object); err != nil {
					t.Fatal(err)
				}
				want := specOf(t, &u)
				if r.installer {
					delete(want.Selector, configure.PlatformLabel(p))
					want.Selector[r.opts.opt.Suffix.InstalledLabel(p)] = "true"
				}
				if g := got[p.Name()]; !equalSpec(g, want) {
					t.Errorf("%s: chart\n  %+v\nberth runtimeclasses\n  %+v", p, g, want)
				}
			}
		})
	}
}

func equalSpec(a, b classSpec) bool {
	return a.Name == b.Name && a.Handler == b.Handler && a.Platform == b.Platform &&
		maps.Equal(a.Overhead, b.Overhead) && maps.Equal(a.Selector, b.Selector)
}

const fullValues = "testdata/helm/full-values.yaml"

// TestHelmLint runs helm's own linter, strict (warnings fail), with the
// default values and with every value set.
func TestHelmLint(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"full", []string{"-f", fullValues}},
		{"agent only", []string{"--set", "nodeInstaller.enabled=false", "--set", "platforms={k3s-qemu-tdx}"}},
		{"node-installer only", []string{"--set", "agent.enabled=false", "--set", "runtimeClasses.enabled=false", "-f", fullValues}},
		{"job mode", []string{"-f", fullValues, "--set", "nodeInstaller.mode=job"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runHelm(t, append([]string{"lint", "--strict", chartDir, "--namespace", releaseNS}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "0 chart(s) failed") {
				t.Errorf("helm lint did not pass:\n%s", out)
			}
		})
	}
}

// TestHelmTemplate pins what the chart renders with the default values and
// with every value set; review the golden diff after changing a template.
func TestHelmTemplate(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"full", []string{"-f", fullValues}},
		{"job", []string{"-f", fullValues, "--set", "nodeInstaller.mode=job", "--set", "nodeInstaller.job.parallelism=3", "--set", "nodeInstaller.job.timeout=45m"}},
		// The second release of an A/B upgrade: suffixed, without its
		// own agent (and so without the CRD the first release owns).
		// (The default class stays with the unsuffixed release.)
		{"suffix", []string{"-f", fullValues, "--set", "installSuffix=blue", "--set", "agent.enabled=false", "--set", "runtimeClasses.createDefault=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			goldenfile.Assert(t, filepath.Join("testdata", "helm", tc.name+".yaml"), []byte(mustRender(t, tc.args...)))
		})
	}
}

// TestChartSchema checks that values.schema.json (and, behind it, the
// templates' own checks) refuse bad values with a message naming the value.
func TestChartSchema(t *testing.T) {
	manifest := "--set=nodeInstaller.manifest=https://example.com/m.json@sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct {
		name string
		args []string
		want []string // all in the error
	}{
		{"unknown platform", []string{"--set", "platforms={k3s-qemu-snp-genoaa}", manifest},
			[]string{"'/platforms/0'", "a platform name as `berth platforms` prints it"}},
		{"kata-deploy alias is not canonical", []string{"--set", "platforms={kata-qemu-snp}", manifest},
			[]string{"'/platforms/0'", "berth platforms"}},
		{"platform of the wrong type", []string{"--set-json", `platforms=[{"name":"k3s-qemu-tdx"}]`, manifest},
			[]string{"'/platforms/0'", "want string"}},
		{"platforms not a list", []string{"--set", "platforms=k3s-qemu-tdx", manifest},
			[]string{"'/platforms'", "want array"}},
		{"duplicate platform", []string{"--set", "platforms={k3s-qemu-tdx,k3s-qemu-tdx}", manifest},
			[]string{"'/platforms'", "are equal"}},
		{"unknown top-level value", []string{"--set", "platfroms={k3s-qemu-tdx}"},
			[]string{"additional properties 'platfroms' not allowed"}},
		{"unknown nested value", []string{"--set", "agent.kvmprobe=true"},
			[]string{"'/agent'", "additional properties 'kvmprobe' not allowed"}},
		{"boolean as a string", []string{"--set-string", "agent.kvmProbe=yes"},
			[]string{"'/agent/kvmProbe'", "want boolean"}},
		{"suffix not a DNS label", []string{"--set", "installSuffix=Blue_1"},
			[]string{"'/installSuffix'", "does not match pattern"}},
		{"suffix too long", []string{"--set", "installSuffix=" + strings.Repeat("a", 22)},
			[]string{"'/installSuffix'", "maxLength: got 22, want 21"}},
		{"bad duration", []string{"--set", "agent.interval=ten minutes"},
			[]string{"'/agent/interval'", "does not match pattern"}},
		{"port out of range", []string{"--set", "nodeInstaller.healthPort=70000"},
			[]string{"'/nodeInstaller/healthPort'", "maximum"}},
		{"platforms without a manifest", []string{"--set", "platforms={k3s-qemu-tdx}"},
			[]string{"'/nodeInstaller/manifest'", "minLength"}},
		{"manifest not pinned", []string{"--set", "platforms={k3s-qemu-tdx}", "--set", "nodeInstaller.manifest=https://example.com/m.json"},
			[]string{"'/nodeInstaller/manifest'", "does not match pattern"}},
		{"relative --from", []string{"--set", "nodeInstaller.from={bundle.tar}"},
			[]string{"'/nodeInstaller/from/0'", "does not match pattern"}},
		{"containerd and CRI-O", []string{"--set", "platforms={custom-qemu-tdx}", manifest, "--set", "nodeInstaller.runtimeUnit=containerd.service",
			"--set", "nodeInstaller.containerdConfig=/etc/containerd/config.toml", "--set", "nodeInstaller.crioConfig=/etc/crio/crio.conf"},
			[]string{"'/nodeInstaller/crioConfig'", "maxLength"}},
		{"extra argument --mode", []string{"--set", "nodeInstaller.extraArgs={--mode=cleanup}"},
			[]string{"'/nodeInstaller/extraArgs/0'", "'not' failed"}},
		{"extra argument not a flag", []string{"--set", "nodeInstaller.extraArgs={parallel}"},
			[]string{"'/nodeInstaller/extraArgs/0'", "does not match pattern"}},
		{"runtime unit not a service", []string{"--set", "platforms={custom-qemu-tdx}", manifest, "--set", "nodeInstaller.containerdConfig=/etc/containerd/config.toml",
			"--set", "nodeInstaller.runtimeUnit=containerd"},
			[]string{"'/nodeInstaller/runtimeUnit'", "does not match pattern"}},
		{"custom platform without its runtime", []string{"--set", "platforms={custom-qemu-tdx}", manifest},
			[]string{"'/nodeInstaller/runtimeUnit'", "'/nodeInstaller/containerdConfig'", "'/nodeInstaller/crioConfig'"}},
		{"runtime paths for a known distribution", []string{"--set", "platforms={k3s-qemu-tdx}", manifest, "--set", "nodeInstaller.runtimeUnit=k3s.service"},
			[]string{"'/nodeInstaller/runtimeUnit'", "maxLength"}},
		{"bad quantity", []string{"--set", "agent.resources.limits.memory=lots"},
			[]string{"'/agent/resources/limits/memory'"}},
		{"bad toleration operator", []string{"--set-json", `agent.tolerations=[{"operator":"Always"}]`},
			[]string{"'/agent/tolerations/0/operator'"}},
		{"digest not sha256", []string{"--set", "image.digest=md5:00"},
			[]string{"'/image/digest'", "does not match pattern"}},
		{"maxUnavailable zero", []string{"--set", "agent.maxUnavailable=0"},
			[]string{"'/agent/maxUnavailable'"}},
		{"RuntimeClass overhead not a quantity", []string{"--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.overrides.kubeadm-qemu-snp.overhead.cpu=lots"},
			[]string{"'/runtimeClasses/overrides/kubeadm-qemu-snp/overhead/cpu'", "does not match pattern"}},
		{"RuntimeClass overhead of a TEE key", []string{"--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.overrides.kubeadm-qemu-snp.overhead.sev-snp\\.amd\\.com/esids=2"},
			[]string{"'/runtimeClasses/overrides/kubeadm-qemu-snp/overhead'", "additional properties 'sev-snp.amd.com/esids' not allowed"}},
		{"RuntimeClass selector on berth's key", []string{"--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.overrides.kubeadm-qemu-snp.nodeSelector.berth\\.dev/installed\\.kubeadm-qemu-snp=no"},
			[]string{"'/runtimeClasses/overrides/kubeadm-qemu-snp/nodeSelector/berth.dev~1installed.kubeadm-qemu-snp'", "keys under berth.dev/ belong to berth"}},
		{"RuntimeClass override of an unknown platform", []string{"--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.overrides.kubeadm-qemu-snpp.overhead.cpu=1"},
			[]string{"a platform name as `berth platforms` prints it"}},
		{"default class without its platform", []string{"--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.createDefault=true"},
			[]string{"'/runtimeClasses/defaultPlatform'", "minLength"}},
		{"default class name not a DNS name", []string{"--set", "runtimeClasses.defaultName=Kata_1"},
			[]string{"'/runtimeClasses/defaultName'", "does not match pattern"}},
		{"update strategy OnDelete", []string{"--set", "nodeInstaller.updateStrategy.type=OnDelete"},
			[]string{"'/nodeInstaller/updateStrategy/type'", "value must be 'RollingUpdate'"}},
		{"update strategy with a surge", []string{"--set", "nodeInstaller.updateStrategy.rollingUpdate.maxSurge=1"},
			[]string{"'/nodeInstaller/updateStrategy/rollingUpdate'", "additional properties 'maxSurge' not allowed"}},
		{"pod label the DaemonSet selects on", []string{"--set", "nodeInstaller.podLabels.app\\.kubernetes\\.io/name=x"},
			[]string{"invalid propertyName 'app.kubernetes.io/name'"}},
		{"pod annotation the chart sets", []string{"--set", "nodeInstaller.podAnnotations.berth\\.dev/config-checksum=x"},
			[]string{"invalid propertyName 'berth.dev/config-checksum'"}},
		{"priority class not a name", []string{"--set", "nodeInstaller.priorityClassName=Node Critical"},
			[]string{"'/nodeInstaller/priorityClassName'", "does not match pattern"}},
		{"affinity not an Affinity", []string{"--set", "agent.affinity.nodeSelector.x=y"},
			[]string{"'/agent/affinity'", "additional properties 'nodeSelector' not allowed"}},
		{"pull secret object without a name", []string{"--set-json", `imagePullSecrets=[{"secret":"x"}]`},
			[]string{"'/imagePullSecrets/0'"}},
		// The templates' own checks, for what a schema cannot say.
		{"node affinity in job mode", []string{"--set", "nodeInstaller.mode=job", "--set-json", `nodeInstaller.affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[]}}}`},
			[]string{"nodeInstaller.affinity.nodeAffinity: job mode pins each node's Job to its node"}},
		{"startup taints entry without a key", []string{"--set", "nodeInstaller.startupTaints={:NoSchedule}"},
			[]string{"'/nodeInstaller/startupTaints/0'", "does not match pattern"}},
		{"startup taints entry without the schema", []string{"--skip-schema-validation", "--set", "nodeInstaller.startupTaints={k:Never}"},
			[]string{`nodeInstaller.startupTaints[0] "k:Never": expected KEY[=VALUE]:EFFECT or a bare KEY`}},
		{"pod label the DaemonSet selects on without the schema", []string{"--skip-schema-validation", "--set", "agent.podLabels.app\\.kubernetes\\.io/name=x"},
			[]string{"agent.podLabels.app.kubernetes.io/name: the chart sets this label itself"}},
		{"default class of a platform not listed", []string{"--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.createDefault=true", "--set", "runtimeClasses.defaultPlatform=kubeadm-qemu-tdx"},
			[]string{`runtimeClasses.defaultPlatform "kubeadm-qemu-tdx": the default RuntimeClass kata must point at one of platforms (kubeadm-qemu-snp)`}},
		{"default class named as a platform's class", []string{"--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.createDefault=true", "--set", "runtimeClasses.defaultPlatform=kubeadm-qemu-snp", "--set", "runtimeClasses.defaultName=kata-qemu-snp"},
			[]string{`runtimeClasses.defaultName "kata-qemu-snp" is already the RuntimeClass of platform kubeadm-qemu-snp`}},
		{"default class of a side-by-side release", []string{"--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.createDefault=true", "--set", "runtimeClasses.defaultPlatform=kubeadm-qemu-snp", "--set", "installSuffix=blue"},
			[]string{`runtimeClasses.createDefault with installSuffix "blue"`}},
		{"RuntimeClass override of a platform not listed", []string{"--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.overrides.kubeadm-qemu-tdx.overhead.cpu=1"},
			[]string{"runtimeClasses.overrides.kubeadm-qemu-tdx: kubeadm-qemu-tdx is not in platforms"}},
		{"RuntimeClass selector on berth's key without the schema", []string{"--skip-schema-validation", "--set", "platforms={kubeadm-qemu-snp}", manifest, "--set", "runtimeClasses.overrides.kubeadm-qemu-snp.nodeSelector.berth\\.dev/x=no"},
			[]string{"runtimeClasses.overrides.kubeadm-qemu-snp.nodeSelector.berth.dev/x: keys under berth.dev/ are berth's own"}},
		{"two platforms of one class", []string{"--set", "platforms={k3s-qemu-tdx,kubeadm-qemu-tdx}", manifest},
			[]string{"k3s-qemu-tdx and kubeadm-qemu-tdx are both RuntimeClass kata-qemu-tdx"}},
		{"suffix too long for a platform's installed label", []string{"--set", "platforms={microk8s-cloud-hypervisor-none+debug+rust+devmapper}", manifest, "--set", "installSuffix=ab"},
			[]string{`installSuffix "ab"`, "berth.dev/installed.microk8s-cloud-hypervisor-none-debug-rust-devmapper-ab would be 64 characters, more than 63"}},
		{"bad suffix without the schema", []string{"--skip-schema-validation", "--set", "installSuffix=-x"},
			[]string{`installSuffix "-x": expected a DNS label`}},
		{"unknown platform without the schema", []string{"--skip-schema-validation", "--set", "platforms={nope}", manifest},
			[]string{`platforms[0]: "nope" is not a berth platform`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChart(t, tc.args...)
			if err == nil {
				t.Fatal("helm template accepted the values")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
			// An unknown platform is reported in one line, not with the
			// thousand names the schema knows.
			if len(err.Error()) > 2000 {
				t.Errorf("the error is %d bytes long, want a short message", len(err.Error()))
			}
		})
	}
}

// difference is one reviewed way in which the chart with default values
// (release berth in berth-system) differs from the kustomize base.
type difference struct {
	kind, name string   // the object; "*" matches every object
	field      []string // removed from both renderings before comparing
	only       string   // without field: the object is only in "base" or "chart"
	why        string
}

// chartVersusBase is every difference between the two renderings. Anything
// else in either (an object, a field, a value) fails the test, and so does
// an entry here that no longer applies.
var chartVersusBase = []difference{
	{kind: "Namespace", name: "berth-system", only: "base",
		why: "Helm installs into the release namespace, which `helm install --create-namespace` creates and Helm stores the release in before applying any template; a chart that also templated it would conflict with that flag and delete the namespace on uninstall. The README shows the Pod Security label to add where the cluster's default level is not privileged."},
	{kind: "*", field: []string{"metadata", "labels", "app.kubernetes.io/managed-by"},
		why: "Helm's ownership label (Helm), which Helm checks before adopting an object"},
	{kind: "*", field: []string{"metadata", "labels", "app.kubernetes.io/instance"},
		why: "the release name, Helm's convention for telling releases apart"},
	{kind: "*", field: []string{"metadata", "labels", "helm.sh/chart"},
		why: "the chart's name and version, Helm's convention"},
	{kind: "DaemonSet", name: "berth-node-installer", field: []string{"spec", "template", "metadata", "annotations", "berth.dev/config-checksum"},
		why: "the ConfigMap's checksum: `helm upgrade` with other platforms or another manifest rolls the node-installer (one node at a time); with kustomize, a ConfigMap change needs `kubectl rollout restart`"},
	{kind: "ServiceAccount", name: "berth-node-installer-teardown", only: "chart",
		why: "helm uninstall's pre-delete hook (teardown); kustomize has no hooks, so base users start the cleanup by hand (README)"},
	{kind: "Role", name: "berth-node-installer-teardown", only: "chart", why: "the teardown hook's rights: get/patch the node-installer DaemonSet, list pods"},
	{kind: "RoleBinding", name: "berth-node-installer-teardown", only: "chart", why: "the teardown hook's rights"},
	{kind: "ClusterRole", name: "berth-node-installer-teardown", only: "chart", why: "the teardown hook's rights: list nodes"},
	{kind: "ClusterRoleBinding", name: "berth-node-installer-teardown", only: "chart", why: "the teardown hook's rights"},
	{kind: "Job", name: "berth-node-installer-teardown", only: "chart", why: "the teardown hook itself"},
}

func objectKey(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + u.GetName()
}

// TestChartMatchesBase renders the kustomize base with kubectl's built-in
// kustomize (what `kubectl apply -k deploy/` uses) and the chart with its
// default values, and compares every object whole: kinds, names, pod
// security contexts, volumes, RBAC rules and the admission policy must be
// equal, up to the reviewed chartVersusBase.
func TestChartMatchesBase(t *testing.T) {
	testenv.Need(t)
	index := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, u := range objs {
			if _, dup := m[objectKey(u)]; dup {
				t.Fatalf("%s rendered twice", objectKey(u))
			}
			m[objectKey(u)] = u
		}
		return m
	}
	base := index(decodeObjects(t, kubectl(t, "kustomize", ".")))
	chart := index(decodeObjects(t, mustRender(t)))
	used := make([]bool, len(chartVersusBase))
	applies := func(d difference, u *unstructured.Unstructured) bool {
		return (d.kind == "*" || d.kind == u.GetKind()) && (d.name == "" || d.name == u.GetName())
	}
	for _, key := range slices.Sorted(maps.Keys(mergeKeys(base, chart))) {
		b, c := base[key], chart[key]
		if b == nil || c == nil {
			side, u := "base", b
			if b == nil {
				side, u = "chart", c
			}
			i := slices.IndexFunc(chartVersusBase, func(d difference) bool { return d.field == nil && d.only == side && applies(d, u) })
			if i < 0 {
				t.Errorf("%s is only in the %s rendering (not in chartVersusBase)", key, side)
				continue
			}
			used[i] = true
			continue
		}
		b, c = b.DeepCopy(), c.DeepCopy()
		for i, d := range chartVersusBase {
			if d.field == nil || !applies(d, b) {
				continue
			}
			for _, u := range []*unstructured.Unstructured{b, c} {
				if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, d.field...); found {
					used[i] = true
					unstructured.RemoveNestedField(u.Object, d.field...)
				}
			}
		}
		// Maps emptied by the removals compare equal to absent ones.
		pruneEmpty(b.Object)
		pruneEmpty(c.Object)
		if !reflect.DeepEqual(b.Object, c.Object) {
			t.Errorf("%s differs between the base (-) and the chart (+):\n%s", key, diff.Diff(b.Object, c.Object))
		}
	}
	for i, d := range chartVersusBase {
		if !used[i] {
			t.Errorf("chartVersusBase entry %s %s %v no longer applies: remove it", d.kind, d.name, d.field)
		}
	}
}

func mergeKeys[V any](a, b map[string]V) map[string]bool {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return m
}

// pruneEmpty removes empty maps nested in m.
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			pruneEmpty(sub)
			if len(sub) == 0 {
				delete(m, k)
			}
		}
	}
}

// TestChartInstall installs the chart with every value set, with the real
// helm, into the test control plane (Kubernetes 1.37): every object must be
// accepted there (server-side dry run for the pre-delete hooks, which
// install does not create). Then the installed admission policy, whose
// user name the chart derives from the release namespace, must confine
// that release's agent (ServiceAccount edge-agent in berth-edge) as the
// base's policy confines berth-system's.
//
// The release takes over the NodeReport CRD the control plane starts with
// (--take-ownership) and is not uninstalled: that would delete the CRD the
// package's other tests use, and the control plane goes away with the
// package. Uninstalling, with its teardown hook, needs a kubelet and a Job
// controller: the real-node test covers it.
func TestChartInstall(t *testing.T) {
	testenv.Need(t)
	const ns = "berth-edge"
	if _, err := runHelm(t, "install", "edge", chartDir, "--namespace", ns, "--create-namespace",
		"--take-ownership", "-f", fullValues, "--kubeconfig", env.Kubeconfig, "--timeout", "60s"); err != nil {
		t.Fatal(err)
	}
	rendered, err := runHelm(t, "template", "edge", chartDir, "--namespace", ns, "-f", fullValues)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "edge.yaml")
	if err := os.WriteFile(file, []byte(rendered), 0o644); err != nil {
		t.Fatal(err)
	}
	out := kubectl(t, "apply", "--dry-run=server", "-f", file)
	for _, u := range decodeObjects(t, rendered) {
		if !strings.Contains(out, "/"+u.GetName()+" ") {
			t.Errorf("kubectl apply --dry-run=server did not report %s:\n%s", objectKey(u), out)
		}
	}
	installed := kubectl(t, "get", "daemonsets,runtimeclasses,validatingadmissionpolicies", "-A", "-l", "app.kubernetes.io/instance=edge", "-o", "name")
	for _, want := range []string{"daemonset.apps/edge-agent", "daemonset.apps/edge-node-installer",
		"runtimeclass.node.k8s.io/kata-qemu-snp", "runtimeclass.node.k8s.io/kata-qemu-nvidia-gpu-snp",
		"validatingadmissionpolicy.admissionregistration.k8s.io/edge-agent"} {
		if !strings.Contains(installed, want) {
			t.Errorf("helm install did not create %s; the release has:\n%s", want, installed)
		}
	}

	waitPolicy(t, "edge-agent", func(c context.Context) error {
		return applyReportOpts(c, env.AsServiceAccount(ns, "edge-agent", "policy-probe"), "not-policy-probe", nil, []string{metav1.DryRunAll})
	})
	agent := env.AsServiceAccount(ns, "edge-agent", "node-edge")
	dryRun := []string{metav1.DryRunAll}
	if err := applyReportOpts(ctx(t), agent, "node-edge", nil, dryRun); err != nil {
		t.Errorf("the release's agent writing its own NodeReport: %v", err)
	}
	err = applyReportOpts(ctx(t), agent, "node-other", nil, dryRun)
	if err == nil || !strings.Contains(err.Error(), "'edge-agent'") || !strings.Contains(err.Error(), "may only write the nodereports named node-edge") {
		t.Errorf("the release's agent writing another node's NodeReport: want a refusal by policy edge-agent, got %v", err)
	}

	// The release's node-installer may remove the startup taints the
	// values configure (example.com/kata-not-ready and the list's keys,
	// a bare key's of any effect), not the base's key.
	admin := testenv.Clientset(t, env.Admin)
	createNode(t, admin, "node-edge-ni", nil)
	const configured = `{"key":"example.com/kata-not-ready","value":"true","effect":"NoExecute"}`
	const listed = `{"key":"example.com/gpu-not-ready","effect":"PreferNoSchedule"}`
	const baseKey = `{"key":"berth.dev/runtime-not-ready","effect":"NoSchedule"}`
	if err := mergePatchNode(ctx(t), env.Admin, "node-edge-ni", `{"spec":{"taints":[`+configured+`,`+listed+`,`+baseKey+`]}}`); err != nil {
		t.Fatal(err)
	}
	installer := env.AsServiceAccount(ns, "edge-node-installer", "node-edge-ni")
	waitPolicy(t, "edge-node-installer", func(c context.Context) error {
		return mergePatchNode(c, env.AsServiceAccount(ns, "edge-node-installer", "policy-probe"), "node-edge-ni", `{"metadata":{"labels":{"berth.dev/installed.probe":"true"}}}`)
	})
	runAccessCases(t, []accessCase{
		{"remove the base's startup taint", func(c context.Context) error {
			return mergePatchNode(c, installer, "node-edge-ni", `{"spec":{"taints":[`+configured+`,`+listed+`]}}`)
		}, false, "may only remove the startup taints example.com/kata-not-ready, katacontainers.io/kata-runtime, example.com/gpu-not-ready from its node"},
		{"remove the configured startup taints", func(c context.Context) error {
			return mergePatchNode(c, installer, "node-edge-ni", `{"spec":{"taints":[`+baseKey+`]}}`)
		}, true, ""},
	})
}

// waitPolicy waits until the API server enforces the ValidatingAdmissionPolicy
// name without type-checking warnings: probe, a request the policy refuses,
// must be refused by it.
func waitPolicy(t *testing.T, name string, probe func(context.Context) error) {
	t.Helper()
	vaps := testenv.Clientset(t, env.Admin).AdmissionregistrationV1().ValidatingAdmissionPolicies()
	var warnings []string
	err := wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, 30*time.Second, true, func(c context.Context) (bool, error) {
		p, err := vaps.Get(c, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
			return false, nil
		}
		warnings = nil
		for _, w := range p.Status.TypeChecking.ExpressionWarnings {
			warnings = append(warnings, w.FieldRef+": "+w.Warning)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the type checking of policy %s did not finish: %v", name, err)
	}
	if len(warnings) > 0 {
		t.Fatalf("policy %s does not type-check:\n%s", name, strings.Join(warnings, "\n"))
	}
	err = wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, 30*time.Second, true, func(c context.Context) (bool, error) {
		err := probe(c)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "'"+name+"'"), nil
	})
	if err != nil {
		t.Fatalf("policy %s did not take effect: %v", name, err)
	}
}
