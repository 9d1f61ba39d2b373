package configure

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/internal/testkit/goldenfile"
	"berth.dev/berth/platform"
)

func mustParse(t testing.TB, s string) platform.Platform {
	t.Helper()
	p, err := platform.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stripHeader drops the leading comment block, which names the platform,
// so that platforms with the same Kata configuration compare equal.
func stripHeader(b []byte) string {
	var out []string
	body := false
	for _, l := range strings.Split(string(b), "\n") {
		if !body && strings.HasPrefix(l, "#") {
			continue
		}
		body = true
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// TestKataConfigEveryPlatform renders the Kata configuration of every
// platform, parses it back, checks every key against the keys Kata's
// templates (testdata/upstream) define for that table, so that a typo
// never reaches a node, where Kata would silently ignore it, and the
// values the platform implies, and keeps one golden file per distinct
// configuration.
func TestKataConfigEveryPlatform(t *testing.T) {
	known := templateKeys(t)
	ps := Paths{Prefix: DefaultPrefix}
	seen := map[string]string{}
	for _, p := range platform.All() {
		data := KataConfig(p, ps)
		var doc map[string]any
		if err := toml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: rendered Kata config does not parse: %v\n%s", p, err, data)
		}
		tables := flatten(doc)
		for table, keys := range tables {
			allowed, ok := known[table]
			if !ok {
				t.Errorf("%s: table [%s] is not one Kata reads", p, table)
				continue
			}
			for _, k := range keys {
				// Confidential AKS runs Microsoft's Kata fork (kata-cc),
				// which reads the SNP keys upstream's Cloud Hypervisor
				// templates do not set, and sizes its VMs with
				// static_sandbox_default_workload_mem (as Contrast's
				// AKS-CLH-SNP configuration does).
				forkKey := p.Shim() == "" && slices.Contains([]string{"confidential_guest", "sev_snp_guest", "igvm", "static_sandbox_default_workload_mem"}, k)
				if !slices.Contains(allowed, k) && !forkKey {
					t.Errorf("%s: key %s.%s is not in Kata's configuration templates", p, table, k)
				}
			}
		}
		hv := doc["hypervisor"].(map[string]any)[p.KataSection()].(map[string]any)
		if !p.Local() {
			if hv["remote_hypervisor_socket"] != "/run/peerpod/hypervisor.sock" {
				t.Errorf("%s: remote_hypervisor_socket %v", p, hv["remote_hypervisor_socket"])
			}
			continue
		}
		if got := hv["default_memory"]; got != int64(p.DefaultMemoryMiB()) {
			t.Errorf("%s: default_memory %v, want %d", p, got, p.DefaultMemoryMiB())
		}
		// Statically sized VMs (confidential AKS, as Contrast renders
		// AKS-CLH-SNP) get the default workload memory on top.
		if w := p.StaticWorkloadMemoryMiB(); w > 0 {
			rt, _ := doc["runtime"].(map[string]any)
			if rt["static_sandbox_resource_mgmt"] != true || rt["static_sandbox_default_workload_mem"] != int64(w) {
				t.Errorf("%s: static_sandbox_resource_mgmt %v, static_sandbox_default_workload_mem %v, want true, %d",
					p, rt["static_sandbox_resource_mgmt"], rt["static_sandbox_default_workload_mem"], w)
			}
		}
		if got, _ := hv["confidential_guest"].(bool); got != p.Confidential() {
			t.Errorf("%s: confidential_guest %v", p, got)
		}
		if got, _ := hv["sev_snp_guest"].(bool); got != (p.TEE() == platform.SNP) {
			t.Errorf("%s: sev_snp_guest %v", p, got)
		}
		if got, _ := hv["cold_plug_vfio"].(string); (got == "root-port") != p.GPU() {
			t.Errorf("%s: cold_plug_vfio %q", p, got)
		}
		if sfs, ok := hv["shared_fs"]; ok && p.Snapshotter() != p.DefaultSnapshotter() && sfs != p.SharedFS() {
			t.Errorf("%s: shared_fs %v, want %s", p, hv["shared_fs"], p.SharedFS())
		}
		kubelet := "/" + p.Distribution().KubeletRoot()
		rt, _ := doc["runtime"].(map[string]any)
		if got, ok := rt["kubelet_root_dir"].(string); ok && got != kubelet {
			t.Errorf("%s: kubelet_root_dir %q, want %q", p, got, kubelet)
		}
		if got, _ := rt["pod_resource_api_sock"].(string); got != "" && got != kubelet+"/pod-resources/kubelet.sock" {
			t.Errorf("%s: pod_resource_api_sock %q, want it under %s", p, got, kubelet)
		}
		if got, _ := hv["enable_debug"].(bool); got != p.Debug() {
			t.Errorf("%s: enable_debug %v", p, got)
		}
		for _, k := range []string{"path", "kernel", "image", "initrd", "firmware", "virtio_fs_daemon", "igvm"} {
			if s, ok := hv[k].(string); ok && s != "" && !strings.HasPrefix(s, DefaultPrefix+"/") {
				t.Errorf("%s: %s = %q is not under the prefix", p, k, s)
			}
		}
		// Configurations that differ only in the kubelet's root (k0s,
		// microk8s; checked above, and in TestKataConfigKubeletRoot's
		// goldens) share one golden.
		body := strings.ReplaceAll(stripHeader(data), kubelet+"/", upstreamKubeletRoot+"/")
		body = strings.ReplaceAll(body, `"`+kubelet+`"`, `"`+upstreamKubeletRoot+`"`)
		if _, ok := seen[body]; !ok {
			seen[body] = p.Name()
			goldenfile.Assert(t, filepath.Join("testdata", "kata", p.Name()+".toml"), data)
		}
	}
	t.Logf("%d platforms, %d distinct Kata configurations", len(platform.All()), len(seen))
}

// TestKataConfigKubeletRoot: where a distribution moves the kubelet's root
// (k0s, microk8s), the Kata configuration points kubelet_root_dir and the
// pod-resources socket (GPU cold-plug) there, for both runtimes.
func TestKataConfigKubeletRoot(t *testing.T) {
	for _, tc := range []struct{ plat, root string }{
		{"k0s-qemu-tdx+gpu+rust", "/var/lib/k0s/kubelet"},
		{"k0s-qemu-none+gpu", "/var/lib/k0s/kubelet"},
		{"microk8s-qemu-none+gpu+rust", "/var/snap/microk8s/common/var/lib/kubelet"},
		{"k3s-qemu-tdx+gpu+rust", "/var/lib/kubelet"},
	} {
		p := mustParse(t, tc.plat)
		data := KataConfig(p, Paths{Prefix: DefaultPrefix})
		var doc map[string]any
		if err := toml.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		rt, _ := doc["runtime"].(map[string]any)
		if got := rt["pod_resource_api_sock"]; got != tc.root+"/pod-resources/kubelet.sock" {
			t.Errorf("%s: pod_resource_api_sock %v, want under %s", p, got, tc.root)
		}
		if got, ok := rt["kubelet_root_dir"]; ok && got != tc.root {
			t.Errorf("%s: kubelet_root_dir %v, want %s", p, got, tc.root)
		}
		if tc.root != upstreamKubeletRoot {
			goldenfile.Assert(t, filepath.Join("testdata", "kata", p.Name()+".toml"), data)
		}
	}
}

// flatten lists the keys of each table that holds values ("hypervisor.qemu").
func flatten(doc map[string]any) map[string][]string {
	out := map[string][]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				name := k
				if prefix != "" {
					name = prefix + "." + k
				}
				walk(name, sub)
				continue
			}
			out[prefix] = append(out[prefix], k)
		}
	}
	walk("", doc)
	return out
}

var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestNamesAndRuntimeClassEveryPlatform(t *testing.T) {
	for _, p := range platform.All() {
		for _, n := range []string{p.Name(), p.Handler(), p.KataRuntimeClass()} {
			if !dns1123.MatchString(n) || len(n) > 63 {
				t.Errorf("%s: name %q is not a DNS-1123 label", p, n)
			}
		}
		if n := strings.TrimPrefix(PlatformLabel(p), "berth.dev/"); len(n) > 63 {
			t.Errorf("%s: label name %q longer than 63", p, n)
		}
		for _, tee := range []bool{false, true} {
			var rc struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Handler    string `json:"handler"`
				Metadata   struct {
					Name   string            `json:"name"`
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
				Overhead struct {
					PodFixed map[string]string `json:"podFixed"`
				} `json:"overhead"`
				Scheduling struct {
					NodeSelector map[string]string `json:"nodeSelector"`
				} `json:"scheduling"`
			}
			if err := yaml.UnmarshalStrict(RuntimeClass(p, RuntimeClassOptions{TEELabels: tee}), &rc); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			o := p.PodOverhead()
			if rc.APIVersion != "node.k8s.io/v1" || rc.Kind != "RuntimeClass" || rc.Handler != p.Handler() || rc.Metadata.Name != p.KataRuntimeClass() ||
				rc.Overhead.PodFixed["memory"] != fmt.Sprintf("%dMi", o.MemoryMiB) ||
				rc.Overhead.PodFixed["cpu"] != fmt.Sprintf("%dm", o.MilliCPU) ||
				rc.Scheduling.NodeSelector[PlatformLabel(p)] != "true" {
				t.Errorf("%s: RuntimeClass %+v", p, rc)
			}
			want := 1
			if tee && p.Confidential() {
				want = 2
			}
			// A confidential GPU class also selects the GPU operator's
			// readiness label, as kata-deploy's classes do.
			if p.GPU() && p.Confidential() {
				want++
				if rc.Scheduling.NodeSelector[platform.NVIDIACCReadyLabel] != "true" {
					t.Errorf("%s: node selector %v without %s=true", p, rc.Scheduling.NodeSelector, platform.NVIDIACCReadyLabel)
				}
			}
			if len(rc.Scheduling.NodeSelector) != want {
				t.Errorf("%s (tee labels %v): node selector %v", p, tee, rc.Scheduling.NodeSelector)
			}
		}
	}
}

func targetFor(t *testing.T, layout string, v int, imports ...string) Target {
	t.Helper()
	l, ok := platform.Layouts()[layout]
	if !ok {
		t.Fatalf("no layout %s", layout)
	}
	return Target{LayoutName: layout, Layout: l, ConfigVersion: v, Imports: imports,
		Facts: []Fact{{What: fmt.Sprintf("containerd config version %d", v), Source: "test"}}}
}

// TestRenderGolden renders every file of one platform per layout and
// config version.
func TestRenderGolden(t *testing.T) {
	cases := []struct {
		name, plat, layout string
		v                  int
		imports            []string
	}{
		{"kubeadm-v2", "kubeadm-qemu-snp", "kubeadm", 2, nil},
		{"kubeadm-v3", "kubeadm-qemu-snp", "kubeadm", 3, nil},
		{"kubeadm-v3-imports-elsewhere", "kubeadm-qemu-tdx", "kubeadm", 3, []string{"/etc/containerd/config.d/*.toml"}},
		{"k3s-v2", "k3s-qemu-snp-genoa+gpu", "k3s", 2, nil},
		{"k3s-v3", "k3s-qemu-snp-genoa+gpu", "k3s", 3, nil},
		{"rke2-v3", "rke2-qemu-tdx+debug", "rke2", 3, nil},
		{"k0s-v3", "k0s-fc-none", "k0s", 3, nil},
		{"microk8s-v2", "microk8s-clh-none", "microk8s", 2, nil},
		{"aks-v3", "aks-clh-snp", "aks", 3, nil},
		{"openshift-crio", "openshift-qemu-tdx", "openshift", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustParse(t, tc.plat)
			r, err := Render(p, targetFor(t, tc.layout, tc.v, tc.imports...), Options{TEELabels: true})
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			for _, f := range r.Host[1:] { // the Kata config has its own goldens
				fmt.Fprintf(&b, "==> %s (%s, block %q) <==\n", f.Path, f.Kind, f.BlockID)
				if f.Base != nil {
					fmt.Fprintf(&b, "base when absent: %q\n", f.Base)
				}
				b.Write(f.Content)
				if f.Format == "toml" {
					if err := toml.Unmarshal(f.Content, new(map[string]any)); err != nil {
						t.Errorf("%s does not parse: %v", f.Path, err)
					}
				}
			}
			fmt.Fprintf(&b, "==> runtimeclass <==\n%s", r.RuntimeClass)
			goldenfile.Assert(t, filepath.Join("testdata", "render", tc.name+".txt"), b.Bytes())
		})
	}
}

// TestCRIODropInReadsBack parses the CRI-O drop-in with the reader
// discovery uses: CRI-O is not installable here, so this is its proof.
func TestCRIODropInReadsBack(t *testing.T) {
	for _, s := range []string{"openshift-qemu-tdx", "openshift-qemu-none", "openshift-qemu-snp+gpu"} {
		p := mustParse(t, s)
		r, err := Render(p, targetFor(t, "openshift", 0), Options{})
		if err != nil {
			t.Fatal(err)
		}
		f := r.Host[1]
		if f.Path != "etc/crio/crio.conf.d/"+CRIODropInName(p.Name()) || f.Kind != Owned {
			t.Fatalf("CRI-O file %s (%s)", f.Path, f.Kind)
		}
		c, err := runtimecfg.ParseCRIO(f.Path, f.Content)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Handlers) != 1 {
			t.Fatalf("handlers %+v", c.Handlers)
		}
		h := c.Handlers[0]
		ps := Paths{Prefix: DefaultPrefix}
		if h.Name != p.Handler() || h.RuntimeType != "vm" || h.RuntimePath != ps.Shim(p) || h.RuntimeRoot != "/run/vc" ||
			h.ConfigPath != ps.KataConfig(p) || !h.PrivilegedWithoutHostDevices || !slices.Contains(h.PodAnnotations, "io.katacontainers.*") {
			t.Errorf("%s: handler read back as %+v", p, h)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	p := mustParse(t, "kubeadm-qemu-snp")
	if _, err := Render(p, targetFor(t, "kubeadm", 0), Options{}); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("version 0: %v, want ErrUnknownVersion", err)
	}
	if _, err := Render(p, targetFor(t, "kubeadm", 5), Options{}); !errors.Is(err, ErrUnknownVersion) {
		t.Errorf("version 5: %v", err)
	}
	if _, err := Render(p, targetFor(t, "kubeadm", 3), Options{Paths: Paths{Prefix: "opt/x"}}); err == nil {
		t.Error("relative prefix accepted")
	}
}

// BenchmarkRender is `berth config render` minus discovery: every file
// of one platform.
func BenchmarkRender(b *testing.B) {
	p := mustParse(b, "k3s-qemu-snp-genoa+gpu")
	l := platform.Layouts()["k3s"]
	t := Target{LayoutName: "k3s", Layout: l, ConfigVersion: 3}
	for b.Loop() {
		if _, err := Render(p, t, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
