package discover

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// kubeletSeeds are the real files of testdata/kubelet (see its README for
// their provenance), keyed by name.
func kubeletSeeds(t testing.TB) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join("testdata", "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if e.Name() == "README.md" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", "kubelet", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func TestKubeletTimeout(t *testing.T) {
	seeds := kubeletSeeds(t)
	k3sUnit := "[Service]\nExecStart=/usr/local/bin/k3s \\\n    server \\\n"
	tests := []struct {
		name  string
		dist  string
		files map[string]string
		// want is the timeout, source the start of its source; unknown
		// the start of the reason when the timeout is unknown.
		want, source, unknown string
	}{
		{name: "kubeadm generated config: zero is the default", dist: "kubeadm",
			files: map[string]string{"var/lib/kubelet/config.yaml": seeds["kubeadm-v1.37-config.yaml"],
				"var/lib/kubelet/kubeadm-flags.env": seeds["kubeadm-flags.env"]},
			want: "2m0s", source: "var/lib/kubelet/config.yaml:"},
		{name: "kubeadm without config: default, section empty", dist: "kubeadm",
			files: map[string]string{"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": "[Service]\nExecStart=/usr/bin/kubelet $KUBELET_EXTRA_ARGS\n"}},
		{name: "kubeadm config sets 15m", dist: "kubeadm",
			files: map[string]string{"var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\nruntimeRequestTimeout: 15m\n"},
			want:  "15m0s", source: "var/lib/kubelet/config.yaml:2 runtimeRequestTimeout"},
		{name: "KUBELET_EXTRA_ARGS flag beats the config file", dist: "kubeadm",
			files: map[string]string{
				"var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\nruntimeRequestTimeout: 15m\n",
				"etc/default/kubelet":         "KUBELET_EXTRA_ARGS=\"--node-ip=10.0.0.5 --runtime-request-timeout=20m\"\n"},
			want: "20m0s", source: "etc/default/kubelet:1 --runtime-request-timeout"},
		{name: "systemd drop-in Environment with a space-separated flag", dist: "kubeadm",
			files: map[string]string{"etc/systemd/system/kubelet.service.d/20-timeout.conf": "[Service]\nEnvironment=\"KUBELET_EXTRA_ARGS=--runtime-request-timeout 30m\"\n"},
			want:  "30m0s", source: "etc/systemd/system/kubelet.service.d/20-timeout.conf:2"},
		{name: "--config points elsewhere, drop-in dir overrides it", dist: "kubeadm",
			files: map[string]string{
				"var/lib/kubelet/kubeadm-flags.env":        "KUBELET_KUBEADM_ARGS=\"--config=/etc/kubelet/kc.yaml --config-dir=/etc/kubelet/conf.d\"\n",
				"etc/kubelet/kc.yaml":                      "{\"kind\": \"KubeletConfiguration\", \"runtimeRequestTimeout\": \"3m\"}\n",
				"etc/kubelet/conf.d/10-a.conf":             "kind: KubeletConfiguration\nruntimeRequestTimeout: 4m\n",
				"etc/kubelet/conf.d/20-b.conf":             "kind: KubeletConfiguration\nruntimeRequestTimeout: 11m\n",
				"etc/kubelet/conf.d/30-other-key.conf":     "kind: KubeletConfiguration\nmaxPods: 200\n",
				"etc/kubelet/conf.d/40-not-a-drop-in.yaml": "kind: KubeletConfiguration\nruntimeRequestTimeout: 1m\n"},
			want: "11m0s", source: "etc/kubelet/conf.d/20-b.conf:2"},
		{name: "running kubelet's command line wins over the files", dist: "kubeadm",
			files: map[string]string{
				"proc/4242/comm":              "kubelet\n",
				"proc/4242/cmdline":           "/usr/bin/kubelet\x00--config=/var/lib/kubelet/config.yaml\x00--runtime-request-timeout=12m\x00",
				"proc/1/comm":                 "systemd\n",
				"proc/1/cmdline":              "/sbin/init\x00",
				"etc/default/kubelet":         "KUBELET_EXTRA_ARGS=--runtime-request-timeout=1m\n",
				"var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\nruntimeRequestTimeout: 15m\n"},
			want: "12m0s", source: "proc/4242/cmdline --runtime-request-timeout"},
		{name: "running kubelet without the flag: its --config", dist: "kubeadm",
			files: map[string]string{
				"proc/77/comm":        "kubelet\n",
				"proc/77/cmdline":     "/usr/bin/kubelet\x00--config\x00/etc/kubernetes/kubelet-custom.yaml\x00",
				"etc/default/kubelet": "KUBELET_EXTRA_ARGS=--runtime-request-timeout=1m\n",
				"etc/kubernetes/kubelet-custom.yaml": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n" +
					"runtimeRequestTimeout: 10m0s\n"},
			want: "10m0s", source: "etc/kubernetes/kubelet-custom.yaml:3"},
		{name: "unparseable duration names the file and line", dist: "kubeadm",
			files:   map[string]string{"var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\nmaxPods: 10\nruntimeRequestTimeout: ten minutes\n"},
			unknown: "unparseable: var/lib/kubelet/config.yaml:3: runtimeRequestTimeout: \"ten minutes\""},
		{name: "a number is not a duration", dist: "kubeadm",
			files:   map[string]string{"var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\nruntimeRequestTimeout: 600\n"},
			unknown: "unparseable: var/lib/kubelet/config.yaml:2: runtimeRequestTimeout: 600 is not a duration"},
		{name: "broken YAML", dist: "kubeadm",
			files:   map[string]string{"var/lib/kubelet/config.yaml": "kind: [KubeletConfiguration\n"},
			unknown: "unparseable: var/lib/kubelet/config.yaml: not a KubeletConfiguration"},
		{name: "no distribution, no kubelet", dist: "", files: map[string]string{"etc/hostname": "x\n"},
			unknown: "missing: no kubelet found"},
		{name: "k3s docs config: default", dist: "k3s",
			files: map[string]string{"etc/rancher/k3s/config.yaml": seeds["k3s-docs-config.yaml"]}},
		{name: "k3s kubelet-arg list", dist: "k3s",
			files: map[string]string{"etc/rancher/k3s/config.yaml": "token: x\nkubelet-arg:\n  - \"max-pods=200\"\n  - \"runtime-request-timeout=10m\"\n"},
			want:  "10m0s", source: "etc/rancher/k3s/config.yaml:4 kubelet-arg runtime-request-timeout"},
		{name: "k3s drop-in kubelet-arg+ appends; last wins", dist: "k3s",
			files: map[string]string{
				"etc/rancher/k3s/config.yaml":                   "kubelet-arg:\n  - runtime-request-timeout=5m\n",
				"etc/rancher/k3s/config.yaml.d/50-kata.yaml":    "kubelet-arg+:\n  - runtime-request-timeout=15m\n",
				"etc/rancher/k3s/config.yaml.d/60-other.yaml":   "node-label+:\n  - a=b\n",
				"etc/rancher/k3s/config.yaml.d/README.md":       "not read\n",
				"etc/rancher/k3s/config.yaml.d/70-ignored.yml":  "kubelet-arg: [runtime-request-timeout=1m]\n",
				"etc/rancher/k3s/config.yaml.d/40-earlier.yaml": "kubelet-arg: runtime-request-timeout=2m\n"},
			want: "15m0s", source: "etc/rancher/k3s/config.yaml.d/50-kata.yaml:2"},
		{name: "k3s drop-in kubelet-arg replaces the list", dist: "k3s",
			files: map[string]string{
				"etc/rancher/k3s/config.yaml":                "kubelet-arg:\n  - runtime-request-timeout=15m\n",
				"etc/rancher/k3s/config.yaml.d/50-kata.yaml": "kubelet-arg:\n  - max-pods=300\n"}},
		{name: "k3s unit's --kubelet-arg replaces the config file's", dist: "k3s",
			files: map[string]string{
				"etc/rancher/k3s/config.yaml":    "kubelet-arg:\n  - runtime-request-timeout=15m\n",
				"etc/systemd/system/k3s.service": k3sUnit + "    '--kubelet-arg' \\\n    'runtime-request-timeout=25m' \\\n"},
			want: "25m0s", source: "etc/systemd/system/k3s.service:5 --kubelet-arg runtime-request-timeout"},
		{name: "k3s kubelet-arg with a bad duration", dist: "k3s",
			files:   map[string]string{"etc/rancher/k3s/config.yaml": "kubelet-arg:\n  - runtime-request-timeout=10\n"},
			unknown: "unparseable: etc/rancher/k3s/config.yaml:2: kubelet-arg \"runtime-request-timeout=10\""},
		{name: "k3s kubelet-arg of the wrong type", dist: "k3s",
			files:   map[string]string{"etc/rancher/k3s/config.yaml": "kubelet-arg:\n  timeout: 10m\n"},
			unknown: "unparseable: etc/rancher/k3s/config.yaml:1: kubelet-arg: want a list"},
		{name: "rke2 kubelet-arg", dist: "rke2",
			files: map[string]string{"etc/rancher/rke2/config.yaml": "kubelet-arg: [\"--runtime-request-timeout=600s\"]\n"},
			want:  "10m0s", source: "etc/rancher/rke2/config.yaml:1"},
		{name: "k0s worker profile", dist: "k0s",
			files: map[string]string{
				"etc/systemd/system/k0sworker.service": "[Service]\nExecStart=/usr/local/bin/k0s worker --profile=guestpull --token-file=/etc/k0s/token\n",
				"etc/k0s/k0s.yaml": "apiVersion: k0s.k0sproject.io/v1beta1\nkind: ClusterConfig\nspec:\n  workerProfiles:\n" +
					"  - name: other\n    values:\n      runtimeRequestTimeout: 1m\n" +
					"  - name: guestpull\n    values:\n      maxPods: 100\n      runtimeRequestTimeout: 10m\n"},
			want: "10m0s", source: "etc/k0s/k0s.yaml:11 workerProfiles[guestpull].values.runtimeRequestTimeout"},
		{name: "k0s kubelet extra args beat the profile", dist: "k0s",
			files: map[string]string{
				"etc/systemd/system/k0sworker.service": "[Service]\nExecStart=/usr/local/bin/k0s worker \"--kubelet-extra-args=--runtime-request-timeout=30m --max-pods=50\"\n",
				"etc/k0s/k0s.yaml":                     "spec:\n  workerProfiles:\n  - name: default\n    values:\n      runtimeRequestTimeout: 5m\n"},
			want: "30m0s", source: "etc/systemd/system/k0sworker.service:2 --runtime-request-timeout"},
		{name: "k0s profile not selected: default", dist: "k0s",
			files: map[string]string{"etc/k0s/k0s.yaml": "spec:\n  workerProfiles:\n  - name: big\n    values:\n      runtimeRequestTimeout: 5m\n"}},
		{name: "microk8s args file", dist: "microk8s",
			files: map[string]string{"var/snap/microk8s/current/args/kubelet": "--kubeconfig=${SNAP_DATA}/credentials/kubelet.config\n# --runtime-request-timeout=1m\n--runtime-request-timeout=10m\n"},
			want:  "10m0s", source: "var/snap/microk8s/current/args/kubelet:3 --runtime-request-timeout"},
		{name: "openshift kubelet.conf", dist: "openshift",
			files: map[string]string{"etc/kubernetes/kubelet.conf": "{\n  \"kind\": \"KubeletConfiguration\",\n  \"apiVersion\": \"kubelet.config.k8s.io/v1beta1\",\n  \"runtimeRequestTimeout\": \"4m0s\"\n}\n"},
			want:  "4m0s", source: "etc/kubernetes/kubelet.conf:4 runtimeRequestTimeout"},
		{name: "a kubeconfig at etc/kubernetes/kubelet.conf is not a KubeletConfiguration", dist: "openshift",
			files: map[string]string{"etc/kubernetes/kubelet.conf": "apiVersion: v1\nkind: Config\nruntimeRequestTimeout: 9m\n"}},
		{name: "oversized file is a problem, not a parse", dist: "kubeadm",
			files:   map[string]string{"var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\n" + strings.Repeat("# pad\n", kubeletFileLimit/6+1)},
			unknown: "larger than 262144 bytes: var/lib/kubelet/config.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := coreRoot(t, tt.files)
			s := &session{root: root, opt: Options{Now: fixedNow}}
			got := kubeletFacts(s, tt.dist)
			var reason string
			for _, m := range s.unknown {
				if m.Field == timeoutField {
					reason = m.Reason
				}
			}
			if tt.unknown != "" {
				if !strings.HasPrefix(reason, tt.unknown) || got != (facts.Kubelet{}) {
					t.Fatalf("got %+v, unknown %q; want unknown %q", got, reason, tt.unknown)
				}
				return
			}
			if reason != "" {
				t.Fatalf("unexpected unknown %q", reason)
			}
			if got.RuntimeRequestTimeout != tt.want || !strings.HasPrefix(got.RuntimeRequestTimeoutSource, tt.source) || (tt.source == "") != (got.RuntimeRequestTimeoutSource == "") {
				t.Errorf("got %+v, want %q from %q", got, tt.want, tt.source)
			}
		})
	}
}

// TestKubeletTimeoutUnreadable: a file that may set the timeout and cannot
// be read makes it unknown, naming the file (not the default).
func TestKubeletTimeoutUnreadable(t *testing.T) {
	root := coreRoot(t, map[string]string{"etc/rancher/k3s/config.yaml": "kubelet-arg: [runtime-request-timeout=10m]\n"})
	p := filepath.Join(root.Path(), "etc/rancher/k3s/config.yaml")
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	s := &session{root: root, opt: Options{Now: fixedNow}}
	if got := kubeletFacts(s, "k3s"); got != (facts.Kubelet{}) {
		t.Errorf("got %+v", got)
	}
	if len(s.unknown) != 1 || s.unknown[0].Field != timeoutField || !strings.Contains(s.unknown[0].Reason, "etc/rancher/k3s/config.yaml") {
		t.Errorf("unknown %+v", s.unknown)
	}
}

// FuzzKubeletConfigs feeds the three parsers of kubelet files: they must
// not panic, and a setting they return is a positive duration with a
// source naming the file.
func FuzzKubeletConfigs(f *testing.F) {
	for _, b := range kubeletSeeds(f) {
		f.Add(b)
	}
	f.Add("kubelet-arg+: runtime-request-timeout=1h\n")
	f.Add("spec:\n  workerProfiles:\n  - name: default\n    values: {runtimeRequestTimeout: 3m}\n")
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > kubeletFileLimit {
			return
		}
		b := []byte(text)
		for _, ts := range []*timeoutSetting{
			must(parseKubeletConfig("c.yaml", b)),
			must(parseK0sProfile("k0s.yaml", b, "default")),
		} {
			if ts != nil && (ts.d <= 0 || !strings.Contains(ts.where, ".yaml")) {
				t.Errorf("setting %+v from %q", ts, text)
			}
		}
		args, _, err := parseRancherArgs("config.yaml", b)
		if err == nil {
			for _, a := range args {
				if a.file != "config.yaml" || a.line < 0 {
					t.Errorf("arg %+v", a)
				}
			}
		}
		for _, fl := range scanFlags(shellWords(text)) {
			if fl.name == "" {
				t.Errorf("empty flag name from %q", text)
			}
		}
	})
}

func must(t *timeoutSetting, _ error) *timeoutSetting { return t }

// TestPodResourcesPerDistribution: the pod-resources socket is looked for
// under the distribution's kubelet root (k0s and MicroK8s move it), so a
// socket at the kubeadm path does not count on k0s.
func TestPodResourcesPerDistribution(t *testing.T) {
	tests := []struct {
		dist, socket string
		files        map[string]string
		present      bool
	}{
		{"kubeadm", "/var/lib/kubelet/pod-resources/kubelet.sock", map[string]string{"var/lib/kubelet/pod-resources/kubelet.sock": ""}, true},
		{"k0s", "/var/lib/k0s/kubelet/pod-resources/kubelet.sock", map[string]string{"var/lib/k0s/kubelet/pod-resources/kubelet.sock": ""}, true},
		{"k0s", "/var/lib/k0s/kubelet/pod-resources/kubelet.sock", map[string]string{"var/lib/kubelet/pod-resources/kubelet.sock": ""}, false},
		{"microk8s", "/var/snap/microk8s/common/var/lib/kubelet/pod-resources/kubelet.sock", map[string]string{"var/snap/microk8s/common/var/lib/kubelet/pod-resources/kubelet.sock": ""}, true},
		{"k3s", "/var/lib/kubelet/pod-resources/kubelet.sock", map[string]string{"etc/hostname": "x\n"}, false},
	}
	for _, tt := range tests {
		s := &session{root: coreRoot(t, tt.files), opt: Options{Now: fixedNow}}
		d := facts.Distribution{Name: tt.dist}
		podResources(s, &d)
		if d.PodResourcesSocket != tt.socket || d.PodResourcesPresent != tt.present {
			t.Errorf("%s %v: socket %q present %v, want %q %v", tt.dist, tt.files, d.PodResourcesSocket, d.PodResourcesPresent, tt.socket, tt.present)
		}
	}
}

// TestKubeletProcsLive starts a real process named kubelet (a script, so
// that the kernel names it after the file) and finds it, with its flags,
// through the live root's /proc, as discovery does on a node.
func TestKubeletProcsLive(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(script, "--config=/var/lib/kubelet/config.yaml", "--runtime-request-timeout", "7m")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	root, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	s := &session{root: root, opt: Options{Now: fixedNow}}
	want := fmt.Sprintf("proc/%d/cmdline", cmd.Process.Pid)
	// The kernel names the process after the script once execve is done.
	deadline := time.Now().Add(5 * time.Second)
	for {
		for _, p := range kubeletProcs(s) {
			if p.cmdline != want {
				continue
			}
			r := &kubeletRead{s: s}
			r.applyFlags(p.cmdline, 0, scanFlags(p.args))
			if r.flag == nil || r.flag.d != 7*time.Minute || r.configPath != "/var/lib/kubelet/config.yaml" {
				t.Fatalf("flags of %v: timeout %+v config %q", p.args, r.flag, r.configPath)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kubelet process %s among %+v", want, kubeletProcs(s))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkKubeletProcsLive is the scan of the machine's processes for the
// kubelet through a live root (one comm read per process).
func BenchmarkKubeletProcsLive(b *testing.B) {
	root, err := hostfs.NewLive("/")
	if err != nil {
		b.Fatal(err)
	}
	s := &session{root: root, opt: Options{Now: fixedNow}}
	for b.Loop() {
		kubeletProcs(s)
	}
}

// TestKubeletDefaultTimeout: discovery's default and the one facts name
// for checks are the same duration.
func TestKubeletDefaultTimeout(t *testing.T) {
	if got := kubeletDefaultTimeout.String(); got != facts.KubeletDefaultRuntimeRequestTimeout {
		t.Errorf("discovery's default %s, facts' %s", got, facts.KubeletDefaultRuntimeRequestTimeout)
	}
}
