package migrate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/testkit/goldenfile"
	"berth.dev/berth/internal/testkit/upstreamtest"
	"berth.dev/berth/platform"
)

const chartDir = "kata-containers-4.1.0/tools/packaging/kata-deploy/helm-chart/kata-deploy"

func upstream(t *testing.T, name string) Input {
	t.Helper()
	p := upstreamtest.Path(t, chartDir, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return Input{Name: name, Data: b}
}

// TestEmbeddedDefaults: the embedded defaults are kata-deploy 4.1.0's
// values.yaml, byte for byte, as testdata/upstream records it.
func TestEmbeddedDefaults(t *testing.T) {
	if !bytes.Equal(chartValues, upstream(t, "values.yaml").Data) {
		t.Fatal("katadeploy-4.1.0-values.yaml differs from testdata/upstream's kata-deploy values.yaml: copy it again")
	}
}

// TestUpstreamFiles: on kata-deploy's own values files the migration
// installs the handlers kata-deploy installs on x86_64 nodes (kata-<shim>
// for every enabled shim whose supportedArches lists amd64), names the
// knobs berth cannot honour, and matches its golden output.
func TestUpstreamFiles(t *testing.T) {
	tests := []struct {
		files       []string
		handlers    []string
		unsupported []string
	}{
		{[]string{"values.yaml"}, []string{
			"kata-clh", "kata-clh-azure", "kata-clh-runtime-rs", "kata-clh-azure-runtime-rs", "kata-dragonball", "kata-fc",
			"kata-qemu", "kata-qemu-runtime-rs", "kata-qemu-nvidia-cpu", "kata-qemu-nvidia-cpu-runtime-rs",
			"kata-qemu-nvidia-gpu", "kata-qemu-nvidia-gpu-runtime-rs", "kata-qemu-nvidia-gpu-snp", "kata-qemu-nvidia-gpu-snp-runtime-rs",
			"kata-qemu-nvidia-gpu-tdx", "kata-qemu-nvidia-gpu-tdx-runtime-rs", "kata-qemu-snp", "kata-qemu-snp-runtime-rs",
			"kata-qemu-tdx", "kata-qemu-tdx-runtime-rs", "kata-qemu-coco-dev", "kata-qemu-coco-dev-runtime-rs", "kata-openvmm-azure-runtime-rs",
		}, nil},
		{[]string{"values.yaml", "try-kata-tee.values.yaml"}, []string{
			"kata-qemu-snp", "kata-qemu-snp-runtime-rs", "kata-qemu-tdx", "kata-qemu-tdx-runtime-rs", "kata-qemu-coco-dev", "kata-qemu-coco-dev-runtime-rs",
		}, []string{"shims.qemu-se.enabled", "shims.qemu-se-runtime-rs.enabled"}},
		{[]string{"try-kata-nvidia-gpu.values.yaml"}, []string{
			"kata-qemu-nvidia-gpu", "kata-qemu-nvidia-gpu-runtime-rs", "kata-qemu-nvidia-gpu-snp", "kata-qemu-nvidia-gpu-snp-runtime-rs",
			"kata-qemu-nvidia-gpu-tdx", "kata-qemu-nvidia-gpu-tdx-runtime-rs",
		}, []string{"snapshotter.erofsSnapshotterMode", "snapshotter.erofsDmverity"}},
		{[]string{"try-kata-nvidia-cpu.values.yaml"}, []string{"kata-qemu-nvidia-cpu", "kata-qemu-nvidia-cpu-runtime-rs"},
			[]string{"snapshotter.erofsSnapshotterMode", "snapshotter.erofsDmverity"}},
	}
	for _, tt := range tests {
		name := strings.Join(tt.files, "+")
		t.Run(name, func(t *testing.T) {
			var in []Input
			for _, f := range tt.files {
				in = append(in, upstream(t, f))
			}
			res, err := KataDeploy(in)
			if err != nil {
				t.Fatal(err)
			}
			if got := handlers(t, res); !slices.Equal(got, tt.handlers) {
				t.Errorf("handlers:\n got %v\nwant %v", got, tt.handlers)
			}
			var unsup []string
			for _, k := range res.Unsupported() {
				if k.Why == "" {
					t.Errorf("%s: not supported without a reason", k.Path)
				}
				unsup = append(unsup, k.Path)
			}
			if !slices.Equal(unsup, tt.unsupported) {
				t.Errorf("unsupported:\n got %v\nwant %v", unsup, tt.unsupported)
			}
			goldenfile.Assert(t, filepath.Join("testdata", strings.TrimSuffix(strings.ReplaceAll(name, ".values.yaml", ""), ".yaml")+".golden"), Golden(res))
		})
	}
}

// handlers are the handlers of the platforms res installs.
func handlers(t *testing.T, res Result) []string {
	t.Helper()
	names, _ := res.Values["platforms"].([]string)
	var out []string
	for _, n := range names {
		p, err := platform.Parse(n)
		if err != nil {
			t.Fatalf("platform %s: %v", n, err)
		}
		out = append(out, p.Handler())
	}
	return out
}

// Golden is the values and every knob, as the golden files hold them.
func Golden(res Result) []byte {
	var b bytes.Buffer
	v, err := yaml.Marshal(res.Values)
	if err != nil {
		panic(err)
	}
	b.Write(v)
	b.WriteString("---\n")
	for _, k := range res.Knobs {
		fmt.Fprintf(&b, "%s:%d %s: %s %s%s\n", k.File, k.Line, k.Path, k.Outcome, k.To, k.Why)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(&b, "note:", n)
	}
	return b.Bytes()
}

// TestKnobs: one knob at a time over kata-deploy's defaults, and what
// becomes of it.
func TestKnobs(t *testing.T) {
	tests := []struct {
		yaml    string
		path    string
		outcome Outcome
		to      string // the berth value set, as path=value in YAML
	}{
		{"deploymentMode: job", "deploymentMode", Mapped, "nodeInstaller:\n  mode: job"},
		{"job:\n  parallelism: 4", "job.parallelism", Mapped, "nodeInstaller:\n  job:\n    parallelism: 4"},
		{"job:\n  nodes: [a]", "job.nodes", Unsupported, ""},
		{"job:\n  backoffLimit: 9", "job.backoffLimit", Unsupported, ""},
		{"job:\n  dispatcherImage:\n    tag: x", "job.dispatcherImage.tag", NotNeeded, ""},
		{"imagePullPolicy: IfNotPresent", "imagePullPolicy", Mapped, "image:\n  pullPolicy: IfNotPresent"},
		{"imagePullSecrets: [{name: s}]", "imagePullSecrets", Mapped, "imagePullSecrets:\n- name: s"},
		{"image:\n  tag: 4.1.0", "image.tag", Unsupported, ""},
		{"kubectlImage:\n  tag: v1", "kubectlImage.tag", NotNeeded, ""},
		{"monitor:\n  enabled: true", "monitor.enabled", Unsupported, ""},
		{"monitor:\n  port: 1", "monitor.port", NotNeeded, ""},
		{"k8sDistribution: k0s", "k8sDistribution", Mapped, ""},
		{"containerd:\n  runtimeSocket: unix:///run/x.sock", "containerd.runtimeSocket", Mapped, "nodeInstaller:\n  runtimeSocket: /run/x.sock"},
		{"containerd:\n  configDir: /etc/x/", "containerd.configDir", Unsupported, ""},
		{"containerd:\n  userDropIn: |\n    [plugins.'io.containerd.snapshotter.v1.erofs']\n      enable_fsverity = false\n", "containerd.userDropIn", Mapped,
			"nodeInstaller:\n  containerdUserDropIn: |\n    [plugins.'io.containerd.snapshotter.v1.erofs']\n      enable_fsverity = false"},
		{"containerd:\n  userDropIn: '[plugins'", "containerd.userDropIn", Unsupported, ""},
		{"nodeSelector:\n  a.b/c: d", "nodeSelector", Mapped, "nodeInstaller:\n  nodeSelector:\n    a.b/c: d"},
		{"tolerations: []", "tolerations", Mapped, "nodeInstaller:\n  tolerations: []"},
		{"startupTaints: ['k:NoSchedule']", "startupTaints", Mapped, "nodeInstaller:\n  startupTaints:\n  - k:NoSchedule"},
		{"startupTaints: [k, 'a:NoSchedule']", "startupTaints", Mapped, "nodeInstaller:\n  startupTaints:\n  - k\n  - a:NoSchedule"},
		{"startupTaints: ['k:Never']", "startupTaints", Unsupported, ""},
		{"podLabels: {a: b, name: x}", "podLabels", Mapped, "nodeInstaller:\n  podLabels:\n    a: b"},
		{"podLabels: {app.kubernetes.io/name: x}", "podLabels", Unsupported, ""},
		{"podAnnotations: {a: b}", "podAnnotations", Mapped, "nodeInstaller:\n  podAnnotations:\n    a: b"},
		{"affinity: {nodeAffinity: {}}", "affinity", Mapped, "nodeInstaller:\n  affinity:\n    nodeAffinity: {}"},
		{"deploymentMode: job\naffinity: {nodeAffinity: {}}", "affinity", Unsupported, ""},
		{"deploymentMode: job\naffinity: {podAntiAffinity: {}}", "affinity", Mapped, "nodeInstaller:\n  affinity:\n    podAntiAffinity: {}\n  mode: job"},
		{"updateStrategy: {type: OnDelete}", "updateStrategy", Unsupported, ""},
		{"updateStrategy: {rollingUpdate: {maxUnavailable: 25%}}", "updateStrategy", Mapped, "nodeInstaller:\n  updateStrategy:\n    rollingUpdate:\n      maxUnavailable: 25%\n    type: RollingUpdate"},
		{"updateStrategy: {rollingUpdate: {maxSurge: 1}}", "updateStrategy", Unsupported, ""},
		{"updateStrategy: {rollingUpdate: {maxUnavailable: 0}}", "updateStrategy", Unsupported, ""},
		{"priorityClassName: x", "priorityClassName", Mapped, "nodeInstaller:\n  priorityClassName: x"},
		{"priorityClassName: system-node-critical", "priorityClassName", Default, ""},
		{"resources: {requests: {cpu: 1}}", "resources", Mapped, "nodeInstaller:\n  resources:\n    requests:\n      cpu: 1\n      memory: 16Mi"},
		{"debug: true", "debug", Mapped, ""},
		{"devkit: true", "devkit", Unsupported, ""},
		{"logLevel: debug", "logLevel", Unsupported, ""},
		{"health:\n  port: 9", "health.port", Mapped, "nodeInstaller:\n  healthPort: 9"},
		{"health:\n  startupProbe:\n    periodSeconds: 5", "health.startupProbe.periodSeconds", NotNeeded, ""},
		{"snapshotter:\n  setup: []", "snapshotter.setup", NotNeeded, ""},
		{"snapshotter:\n  erofsMergeMode: unmerged", "snapshotter.erofsMergeMode", Unsupported, ""},
		{"defaultShim:\n  amd64: qemu", "defaultShim.amd64", NotNeeded, ""},
		// kata-deploy's default shim, qemu-runtime-rs, is enabled by default.
		{"runtimeClasses:\n  createDefault: true", "runtimeClasses.createDefault", Mapped, "runtimeClasses:\n  createDefault: true\n  defaultPlatform: kubeadm-qemu-none+rust"},
		{"runtimeClasses:\n  createDefault: true\n  defaultName: k", "runtimeClasses.defaultName", Mapped, "runtimeClasses:\n  createDefault: true\n  defaultName: k\n  defaultPlatform: kubeadm-qemu-none+rust"},
		{"runtimeClasses:\n  createDefault: true\ndefaultShim:\n  amd64: qemu-tdx", "defaultShim.amd64", Mapped, "runtimeClasses:\n  createDefault: true\n  defaultPlatform: kubeadm-qemu-tdx"},
		{"runtimeClasses:\n  createDefault: true\nshims:\n  qemu-runtime-rs:\n    enabled: false", "runtimeClasses.createDefault", Unsupported, ""},
		{"runtimeClasses:\n  createDefault: true\nenv:\n  multiInstallSuffix: b", "runtimeClasses.createDefault", NotNeeded, ""},
		{"runtimeClasses:\n  enabled: false", "runtimeClasses.enabled", Mapped, "runtimeClasses:\n  enabled: false"},
		{"runtimeClasses:\n  overheadEnabled: false", "runtimeClasses.overheadEnabled", Unsupported, ""},
		{"runtimeClasses:\n  defaultName: k", "runtimeClasses.defaultName", NotNeeded, ""},
		{"env:\n  installationPrefix: /opt/k", "env.installationPrefix", Mapped, "nodeInstaller:\n  prefix: /opt/k"},
		{"env:\n  multiInstallSuffix: b", "env.multiInstallSuffix", Mapped, "installSuffix: b"},
		{"env:\n  hostOS: cbl-mariner", "env.hostOS", NotNeeded, ""},
		{"node-feature-discovery:\n  enabled: true", "node-feature-discovery.enabled", NotNeeded, ""},
		{"nodeFeatureRules:\n  create: true", "nodeFeatureRules.create", Mapped, "nodeInstaller:\n  advertiseTEEKeys: true"},
		{"verification:\n  pod: x", "verification.pod", NotNeeded, ""},
		{"customRuntimes:\n  enabled: true", "customRuntimes.enabled", NotNeeded, ""},
		{"customRuntimes:\n  enabled: true\n  runtimes:\n    big:\n      baseConfig: qemu\n      dropIn: \"[hypervisor.qemu]\\ndefault_memory = 8192\\n\"\n      runtimeClass: \"kind: RuntimeClass\\nhandler: kata-big\\n\"",
			"customRuntimes.runtimes", Mapped, "kata:\n  customRuntimes:\n  - dropIn: |\n      [hypervisor.qemu]\n      default_memory = 8192\n    name: kata-big\n    platform: kubeadm-qemu-none"},
		{"customRuntimes:\n  enabled: true\n  runtimes:\n    big:\n      baseConfig: nope\n      runtimeClass: \"handler: kata-big\"", "customRuntimes.runtimes", Unsupported, ""},
		{"customRuntimes:\n  enabled: true\n  runtimes:\n    big:\n      baseConfig: qemu\n      dropIn: \"[hypervisor.qemu]\\nno_such = 1\\n\"\n      runtimeClass: \"handler: kata-big\"", "customRuntimes.runtimes", Unsupported, ""},
		{"shims:\n  qemu:\n    dropIn: x", "shims.qemu.dropIn", Unsupported, ""},
		{"shims:\n  qemu:\n    dropIn: |\n      [hypervisor.qemu]\n      default_memory = 4096", "shims.qemu.dropIn", Mapped, "kata:\n  dropIns:\n    kubeadm-qemu-none: |-\n      [hypervisor.qemu]\n      default_memory = 4096"},
		{"shims:\n  qemu:\n    dropIn: |\n      [hypervisor.qemu]\n      default_memroy = 4096", "shims.qemu.dropIn", Unsupported, ""},
		{"shims:\n  qemu-tdx:\n    agent:\n      httpsProxy: http://p:3128", "shims.qemu-tdx.agent.httpsProxy", Mapped, "kata:\n  agentProxy:\n    kubeadm-qemu-tdx:\n      httpsProxy: http://p:3128"},
		{"shims:\n  qemu-tdx:\n    agent:\n      httpsProxy: p:3128", "shims.qemu-tdx.agent.httpsProxy", Unsupported, ""},
		{"shims:\n  qemu-tdx:\n    agent:\n      noProxy: localhost,.svc", "shims.qemu-tdx.agent.noProxy", Mapped, "kata:\n  agentProxy:\n    kubeadm-qemu-tdx:\n      noProxy: localhost,.svc"},
		{"debug: true\nshims:\n  qemu-tdx:\n    agent:\n      noProxy: localhost", "shims.qemu-tdx.agent.noProxy", Mapped, "kata:\n  agentProxy:\n    kubeadm-qemu-tdx:\n      noProxy: localhost\n    kubeadm-qemu-tdx+debug:\n      noProxy: localhost"},
		{"debug: true\nshims:\n  qemu:\n    allowedHypervisorAnnotations: [default_vcpus]", "shims.qemu.allowedHypervisorAnnotations", Mapped, "kata:\n  allowedHypervisorAnnotations:\n    kubeadm-qemu-none:\n    - default_vcpus"},
		{"shims:\n  qemu:\n    allowedHypervisorAnnotations: [default_vcpus]", "shims.qemu.allowedHypervisorAnnotations", Mapped, "kata:\n  allowedHypervisorAnnotations:\n    kubeadm-qemu-none:\n    - default_vcpus"},
		{"shims:\n  qemu:\n    allowedHypervisorAnnotations: [vcpus]", "shims.qemu.allowedHypervisorAnnotations", Unsupported, ""},
		{"shims:\n  qemu-tdx:\n    containerd:\n      forceGuestPull: true", "shims.qemu-tdx.containerd.forceGuestPull", Unsupported, ""},
		{"shims:\n  qemu-tdx:\n    crio:\n      guestPull: false", "shims.qemu-tdx.crio.guestPull", NotNeeded, ""},
		{"shims:\n  qemu-tdx:\n    runtimeClass:\n      overhead: {memory: 1Gi}", "shims.qemu-tdx.runtimeClass.overhead", Mapped, "runtimeClasses:\n  overrides:\n    kubeadm-qemu-tdx:\n      overhead:\n        memory: 1Gi"},
		{"debug: true\nshims:\n  qemu-tdx:\n    runtimeClass:\n      overhead: {cpu: 2}", "shims.qemu-tdx.runtimeClass.overhead", Mapped, "runtimeClasses:\n  overrides:\n    kubeadm-qemu-tdx:\n      overhead:\n        cpu: \"2\"\n    kubeadm-qemu-tdx+debug:\n      overhead:\n        cpu: \"2\""},
		{"shims:\n  qemu-tdx:\n    runtimeClass:\n      overhead: {memory: lots}", "shims.qemu-tdx.runtimeClass.overhead", Unsupported, ""},
		{"shims:\n  qemu-tdx:\n    runtimeClass:\n      nodeSelector: {pool: tee, katacontainers.io/kata-runtime: 'true'}", "shims.qemu-tdx.runtimeClass.nodeSelector", Mapped, "runtimeClasses:\n  overrides:\n    kubeadm-qemu-tdx:\n      nodeSelector:\n        pool: tee"},
		{"shims:\n  qemu-tdx:\n    runtimeClass:\n      nodeSelector: {berth.dev/installed.x: 'no'}", "shims.qemu-tdx.runtimeClass.nodeSelector", Unsupported, ""},
		{"shims:\n  qemu-tdx:\n    runtimeClass:\n      overheadEnabled: false", "shims.qemu-tdx.runtimeClass.overheadEnabled", Unsupported, ""},
		{"shims:\n  qemu:\n    containerd:\n      snapshotter: erofs", "shims.qemu.containerd.snapshotter", Mapped, ""},
		{"shims:\n  fc:\n    containerd:\n      snapshotter: ''", "shims.fc.containerd.snapshotter", Unsupported, ""},
		{"shims:\n  qemu-coco-dev:\n    containerd:\n      snapshotter: ''", "shims.qemu-coco-dev.containerd.snapshotter", Unsupported, ""},
		{"shims:\n  qemu:\n    enabled: false", "shims.qemu.enabled", Mapped, ""},
		{"shims:\n  remote:\n    enabled: true", "shims.remote.enabled", Mapped, ""},
		{"shims:\n  qemu-se:\n    enabled: true", "shims.qemu-se.enabled", Unsupported, ""},
		{"shims:\n  bogus:\n    enabled: true", "shims.bogus.enabled", Unsupported, ""},
		{"nodeSelecter: {a: b}", "nodeSelecter.a", Unsupported, ""},
	}
	for _, tt := range tests {
		t.Run(tt.path+"="+tt.yaml, func(t *testing.T) {
			res, err := KataDeploy([]Input{{Name: "u.yaml", Data: []byte(tt.yaml)}})
			if err != nil {
				t.Fatal(err)
			}
			var found *Knob
			for i := range res.Knobs {
				if res.Knobs[i].Path == tt.path {
					found = &res.Knobs[i]
				}
			}
			if found == nil {
				t.Fatalf("no knob %s among %+v", tt.path, res.Knobs)
			}
			if found.Outcome != tt.outcome {
				t.Errorf("%s: %s (%s%s), want %s", tt.path, found.Outcome, found.To, found.Why, tt.outcome)
			}
			if found.File != "u.yaml" || found.Line == 0 {
				t.Errorf("%s set at %s:%d, want u.yaml:N", tt.path, found.File, found.Line)
			}
			if (found.Outcome == Unsupported || found.Outcome == NotNeeded) && found.Why == "" {
				t.Errorf("%s: %s without a reason", tt.path, found.Outcome)
			}
			if tt.to != "" {
				// Only what the knob set: not what every migration sets.
				delete(res.Values, "platforms")
				delete(res.Values, "kataDeploy")
				if ni, ok := res.Values["nodeInstaller"].(map[string]any); ok {
					delete(ni, "kataDeployLabels")
					if len(ni) == 0 {
						delete(res.Values, "nodeInstaller")
					}
				}
				v, err := yaml.Marshal(res.Values)
				if err != nil {
					t.Fatal(err)
				}
				if string(v) != tt.to+"\n" {
					t.Errorf("values\n%s\nwant\n%s", v, tt.to)
				}
			}
		})
	}
}

// TestPlatformsFollowKnobs: distribution, snapshotter and debug shape the
// platform names.
func TestPlatformsFollowKnobs(t *testing.T) {
	tests := []struct {
		yaml string
		want []string
	}{
		{"k8sDistribution: k0s\nshims:\n  disableAll: true\n  qemu-tdx:\n    enabled: true", []string{"k0s-qemu-tdx"}},
		{"k8sDistribution: k3s\ndebug: true\nshims:\n  disableAll: true\n  qemu:\n    enabled: true", []string{"k3s-qemu-none", "k3s-qemu-none+debug"}},
		{"shims:\n  disableAll: true\n  qemu-runtime-rs:\n    enabled: true\n    containerd:\n      snapshotter: erofs", []string{"kubeadm-qemu-none+rust+erofs"}},
		{"shims:\n  disableAll: true\n  qemu-tdx:\n    enabled: true\n    containerd:\n      snapshotter: ''", []string{"kubeadm-qemu-tdx+overlayfs"}},
		{"k8sDistribution: rke2\nshims:\n  disableAll: true\n  clh-azure:\n    enabled: true", []string{"aks-cloud-hypervisor-none"}},
		{"shims:\n  disableAll: true", nil},
	}
	for _, tt := range tests {
		res, err := KataDeploy([]Input{{Name: "u.yaml", Data: []byte(tt.yaml)}})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := res.Values["platforms"].([]string)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: platforms %v, want %v", tt.yaml, got, tt.want)
		}
	}
}

// TestMerge: later files win; mappings merge, lists replace.
func TestMerge(t *testing.T) {
	a := Input{Name: "a.yaml", Data: []byte("nodeSelector: {x: '1'}\ntolerations: [{key: a}, {key: b}]\nshims:\n  disableAll: true\n  qemu:\n    enabled: true\n")}
	b := Input{Name: "b.yaml", Data: []byte("nodeSelector: {y: '2'}\ntolerations: [{key: c}]\nshims:\n  qemu-tdx:\n    enabled: true\n")}
	res, err := KataDeploy([]Input{a, b})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := yaml.Marshal(res.Values)
	for _, want := range []string{"- kubeadm-qemu-none\n", "- kubeadm-qemu-tdx\n", "  tolerations:\n  - key: c\n", "    x: \"1\"\n    \"y\": \"2\"\n"} {
		if !strings.Contains(string(v), want) {
			t.Errorf("merged values lack %q:\n%s", want, v)
		}
	}
	for _, k := range res.Knobs {
		if k.Path == "tolerations" && k.File != "b.yaml" {
			t.Errorf("tolerations attributed to %s:%d, want b.yaml", k.File, k.Line)
		}
	}
}

// TestMalformed: a usage error naming the file and line, never quoting it.
func TestMalformed(t *testing.T) {
	const secret = "hunter2-secret"
	tests := []struct{ name, data, want string }{
		{"not yaml", "a: [" + secret, "bad.yaml: not YAML"},
		{"top level list", "- " + secret, "bad.yaml:1: the top level is not a mapping"},
		{"two documents", "a: 1\n---\nb: " + secret, "bad.yaml:2: a second YAML document"},
		{"duplicate key", "debug: true\ndebug: false # " + secret, "bad.yaml:2: the top level: key \"debug\" given twice"},
		{"bad distribution", "k8sDistribution: " + secret, "bad.yaml:1: k8sDistribution: expected"},
		{"tab indentation", "shims:\n\tqemu: " + secret, "bad.yaml: not YAML"},
		{"shims not a mapping", "debug: true\nshims:", "bad.yaml:2: shims: expected a mapping"},
		{"shim not a mapping", "shims:\n  qemu: [" + secret + "]", "bad.yaml:2: shims.qemu: expected a mapping"},
		{"distribution not a string", "k8sDistribution: {a: " + secret + "}", "bad.yaml:1: k8sDistribution: expected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := KataDeploy([]Input{{Name: "ok.yaml", Data: []byte("debug: false")}, {Name: "bad.yaml", Data: []byte(tt.data)}})
			if err == nil {
				t.Fatal("accepted")
			}
			if !errdefs.IsUsage(err) {
				t.Errorf("not a usage error: %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error quotes the file: %q", err)
			}
		})
	}
}

// FuzzKataDeploy: any input is mapped or refused as a usage error; none
// panics.
func FuzzKataDeploy(f *testing.F) {
	f.Add([]byte("shims:\n  disableAll: true\n  qemu-tdx:\n    enabled: true\n"))
	f.Add([]byte("k8sDistribution: k0s\ndebug: true\n"))
	f.Add([]byte("a: &x {b: 1}\nc: *x\n"))
	f.Add(chartValues)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := KataDeploy([]Input{{Name: "f.yaml", Data: data}}); err != nil && !errdefs.IsUsage(err) {
			t.Fatalf("not a usage error: %v", err)
		}
	})
}
