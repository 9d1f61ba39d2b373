package platform

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// wantValid is the number of valid platforms. A change here is a change of
// the model: say so in the commit message.
const wantValid = 1166

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// TestCartesian walks every combination of every dimension (including the
// zero "default" snapshotter): each is either valid and round-trips through
// every representation, or is rejected with a known compatibility rule.
func TestCartesian(t *testing.T) {
	valid := map[Platform]bool{}
	names := map[string]string{}
	brokenRules := map[string]int{}
	known := map[string]bool{}
	for _, r := range Rules() {
		known[r.ID] = true
	}
	for _, d := range Distributions() {
		for _, h := range Hypervisors() {
			for _, tee := range TEEs() {
				for _, pl := range append([]ProductLine{AnyProductLine}, ProductLines()...) {
					for _, sn := range append([]Snapshotter{0}, Snapshotters()...) {
						for _, v := range cartesianVariants() {
							for _, debug := range []bool{false, true} {
								s := Spec{Distribution: d, Hypervisor: h, TEE: tee, ProductLine: pl, Snapshotter: sn,
									GPU: v.gpu, NvidiaCPU: v.nvcpu, Debug: debug, KataRuntime: v.rt}
								// Suggestions are costly; they are checked on
								// the inputs that vary in the dimensions users
								// type, which every rule is reached from.
								if _, id := build(s); id != "" && (pl > Genoa || debug || v.rt == GoRuntime) {
									if !known[id] || id == "syntax" || id == "spec-complete" {
										t.Errorf("build(%+v): rejected by unexpected rule %q", s, id)
									}
									brokenRules[id]++
									continue
								}
								p, err := New(s)
								if err != nil {
									var ve *ValidationError
									if !errors.As(err, &ve) {
										t.Fatalf("New(%+v): error %v is not a *ValidationError", s, err)
									}
									if !known[ve.Rule.ID] || ve.Rule.ID == "syntax" || ve.Rule.ID == "spec-complete" {
										t.Errorf("New(%+v): rejected by unexpected rule %q", s, ve.Rule.ID)
									}
									if !strings.Contains(err.Error(), "["+ve.Rule.ID+"]") {
										t.Errorf("New(%+v): message %q does not name rule %s", s, err, ve.Rule.ID)
									}
									if len(ve.Suggestions) == 0 {
										t.Errorf("New(%+v): no suggestions", s)
									}
									for _, sug := range ve.Suggestions {
										if _, err := Parse(sug); err != nil {
											t.Errorf("New(%+v): suggestion %q is invalid: %v", s, sug, err)
										}
									}
									// Parse must agree with New on the same spec.
									if _, perr := Parse(formatSpec(s)); perr == nil || !strings.Contains(perr.Error(), "["+ve.Rule.ID+"]") {
										t.Errorf("Parse(%q) = %v, want rule %s", formatSpec(s), perr, ve.Rule.ID)
									}
									brokenRules[ve.Rule.ID]++
									continue
								}
								checkValid(t, p)
								if sn != 0 && p.Snapshotter() != sn {
									t.Errorf("New(%+v).Snapshotter() = %v", s, p.Snapshotter())
								}
								valid[p] = true
								if other, dup := names[p.Name()]; dup && other != p.String() {
									t.Errorf("Name %q shared by %s and %s", p.Name(), other, p)
								}
								names[p.Name()] = p.String()
							}
						}
					}
				}
			}
		}
	}
	if len(valid) != wantValid {
		t.Errorf("%d valid platforms, want %d", len(valid), wantValid)
	}
	all := All()
	if len(all) != len(valid) {
		t.Errorf("All() has %d platforms, the cartesian product %d", len(all), len(valid))
	}
	for _, p := range all {
		if !valid[p] {
			t.Errorf("All() lists %s, which the cartesian walk did not build", p)
		}
	}
	if !slices.Equal(all, All()) {
		t.Error("All() order is not stable")
	}
	// Every compatibility rule must reject something, or it is dead.
	for _, c := range checks() {
		if brokenRules[c.id] == 0 {
			t.Errorf("rule %s never rejects any combination", c.id)
		}
	}
	t.Logf("%d valid platforms; rejections per rule: %v", len(valid), brokenRules)
}

// cartesianVariants crosses the image variants with the Kata runtime,
// including the zero (default) runtime and the invalid GPU+CPU image pair.
func cartesianVariants() (out []struct {
	gpu, nvcpu bool
	rt         KataRuntime
}) {
	for _, gpu := range []bool{false, true} {
		for _, nvcpu := range []bool{false, true} {
			for _, rt := range append([]KataRuntime{0}, KataRuntimes()...) {
				out = append(out, struct {
					gpu, nvcpu bool
					rt         KataRuntime
				}{gpu, nvcpu, rt})
			}
		}
	}
	return out
}

func checkValid(t *testing.T, p Platform) {
	t.Helper()
	s := p.String()
	q, err := Parse(s)
	if err != nil || q != p {
		t.Errorf("Parse(%q) = %v, %v; want the same platform", s, q, err)
	}
	if q, err := Parse(strings.ToUpper(s)); err != nil || q != p {
		t.Errorf("Parse(upper %q) = %v, %v", s, q, err)
	}
	if q, err := New(p.Spec()); err != nil || q != p {
		t.Errorf("New(%s.Spec()) = %v, %v", s, q, err)
	}
	kv := kvForm(p)
	if q, err := Parse(kv); err != nil || q != p {
		t.Errorf("Parse(%q) = %v, %v; want %s", kv, q, err, s)
	}
	b, err := p.MarshalText()
	if err != nil || string(b) != s {
		t.Errorf("%s.MarshalText() = %q, %v", s, b, err)
	}
	var u Platform
	if err := u.UnmarshalText(b); err != nil || u != p {
		t.Errorf("UnmarshalText(%q) = %v, %v", b, u, err)
	}
	if n := p.Name(); len(n) > 63 || !dnsLabel.MatchString(n) {
		t.Errorf("%s.Name() = %q is not a DNS-1123 label", s, n)
	}
	if p.Confidential() != (p.TEE() != NoTEE) || !p.Valid() {
		t.Errorf("%s: inconsistent Confidential/Valid", s)
	}
	// The one confidential path without guest pull is AKS's tardev,
	// whose layers carry dm-verity roots the pod policy pins.
	if p.Confidential() && !p.GuestPull() && p.Snapshotter() != Tardev {
		t.Errorf("%s: confidential without guest pull", s)
	}
	if p.Distribution() == AKS && p.Confidential() {
		if p.KataRuntimeClass() != "kata-cc-isolation" || p.Handler() != "kata-cc" || p.KataConfigFile() != "configuration-clh-snp.toml" {
			t.Errorf("%s: runtime class %q / config %q", s, p.KataRuntimeClass(), p.KataConfigFile())
		}
	} else {
		want := "kata-" + p.Shim()
		if p.Debug() {
			want += "-debug"
		}
		if p.KataRuntimeClass() != want || p.Handler() != want || p.KataConfigFile() != "configuration-"+p.Shim()+".toml" {
			t.Errorf("%s: runtime class %q handler %q / config %q, want %s", s, p.KataRuntimeClass(), p.Handler(), p.KataConfigFile(), want)
		}
		// The class name users have parses back to the same shim.
		q, err := Parse(p.KataRuntimeClass())
		if err != nil || q.Shim() != p.Shim() || q.Debug() != p.Debug() || q.KataRuntime() != p.KataRuntime() {
			t.Errorf("%s: Parse(%s) = %v, %v", s, p.KataRuntimeClass(), q, err)
		}
	}
	if !slices.Contains(p.Hypervisor().Runtimes(), p.KataRuntime()) {
		t.Errorf("%s: runtime %s not shipped", s, p.KataRuntime())
	}
	if o := p.PodOverhead(); o.MemoryMiB <= 0 || o.MilliCPU <= 0 {
		t.Errorf("%s: overhead %+v", s, o)
	}
	if len(AppliesTo(p)) == 0 && (p.Confidential() || p.GPU() || p.Hypervisor() != QEMU) {
		t.Errorf("%s: no rule applies", s)
	}
}

func kvForm(p Platform) string {
	s := "distribution=" + p.Distribution().String() + ", hypervisor=" + p.Hypervisor().Short() +
		",tee=" + p.TEE().String() + ",snapshotter=" + p.Snapshotter().String()
	if p.ProductLine() != AnyProductLine {
		s += ",product=" + p.ProductLine().String()
	}
	if p.GPU() {
		s += ",gpu=true"
	}
	if p.NvidiaCPU() {
		s += ",nvidia-cpu=true"
	}
	s += ",runtime=" + p.KataRuntime().String()
	if p.Debug() {
		s += ",debug=1"
	} else {
		s += ",debug=false"
	}
	return s
}

func TestAliases(t *testing.T) {
	tests := []struct {
		in, want, class string
	}{
		// Kata runtime classes (kata-deploy shims): a plain containerd node.
		{"kata-qemu", "kubeadm-qemu-none", "kata-qemu"},
		{"kata-clh", "kubeadm-cloud-hypervisor-none", "kata-clh"},
		{"kata-fc", "kubeadm-firecracker-none", "kata-fc"},
		{"kata-qemu-snp", "kubeadm-qemu-snp", "kata-qemu-snp"},
		{"kata-qemu-tdx", "kubeadm-qemu-tdx", "kata-qemu-tdx"},
		{"kata-qemu-coco-dev", "kubeadm-qemu-none+nydus", "kata-qemu-coco-dev"},
		{"kata-qemu-nvidia-gpu", "kubeadm-qemu-none+gpu", "kata-qemu-nvidia-gpu"},
		{"kata-qemu-nvidia-gpu-snp", "kubeadm-qemu-snp+gpu", "kata-qemu-nvidia-gpu-snp"},
		{"kata-qemu-nvidia-gpu-tdx", "kubeadm-qemu-tdx+gpu", "kata-qemu-nvidia-gpu-tdx"},
		{"KATA-QEMU-SNP", "kubeadm-qemu-snp", "kata-qemu-snp"},
		{"kata-qemu-snp+debug", "kubeadm-qemu-snp+debug", "kata-qemu-snp-debug"},
		{"kata-qemu-snp-debug", "kubeadm-qemu-snp+debug", "kata-qemu-snp-debug"},
		{"kata-qemu-snp-runtime-rs", "kubeadm-qemu-snp+rust", "kata-qemu-snp-runtime-rs"},
		{"kata-qemu-nvidia-gpu-tdx-runtime-rs-debug", "kubeadm-qemu-tdx+gpu+debug+rust", "kata-qemu-nvidia-gpu-tdx-runtime-rs-debug"},
		{"kata-qemu-coco-dev-runtime-rs", "kubeadm-qemu-none+rust+nydus", "kata-qemu-coco-dev-runtime-rs"},
		{"kata-qemu-nvidia-cpu", "kubeadm-qemu-none+nvidia-cpu", "kata-qemu-nvidia-cpu"},
		{"kata-clh-runtime-rs", "kubeadm-cloud-hypervisor-none+rust", "kata-clh-runtime-rs"},
		{"kata-dragonball", "kubeadm-dragonball-none", "kata-dragonball"},
		{"kata-stratovirt", "kubeadm-stratovirt-none", "kata-stratovirt"},
		{"kata-remote", "kubeadm-remote-none", "kata-remote"},
		{"kata-clh-azure", "aks-cloud-hypervisor-none", "kata-clh-azure"},
		{"kata-clh-azure-runtime-rs", "aks-cloud-hypervisor-none+rust", "kata-clh-azure-runtime-rs"},
		{"kata-openvmm-azure-runtime-rs", "aks-openvmm-none", "kata-openvmm-azure-runtime-rs"},
		{"k3s-qemu-snp+rs", "k3s-qemu-snp+rust", "kata-qemu-snp-runtime-rs"},
		{"k3s-qemu-snp+go", "k3s-qemu-snp", "kata-qemu-snp"},
		{"contrast-cc-metal-qemu-snp-1a2b3c4d", "kubeadm-qemu-snp", "kata-qemu-snp"},
		{"contrast-cc-metal-qemu-tdx-gpu-0123abcd", "kubeadm-qemu-tdx+gpu", "kata-qemu-nvidia-gpu-tdx"},
		{"kata-fc+blockfile", "kubeadm-firecracker-none+blockfile", "kata-fc"},
		// Contrast platform names, current and historic.
		{"Metal-QEMU-SNP", "kubeadm-qemu-snp", "kata-qemu-snp"},
		{"Metal-QEMU-TDX", "kubeadm-qemu-tdx", "kata-qemu-tdx"},
		{"Metal-QEMU-SNP-GPU", "kubeadm-qemu-snp+gpu", "kata-qemu-nvidia-gpu-snp"},
		{"Metal-QEMU-TDX-GPU", "kubeadm-qemu-tdx+gpu", "kata-qemu-nvidia-gpu-tdx"},
		{"K3s-QEMU-SNP", "k3s-qemu-snp", "kata-qemu-snp"},
		{"K3s-QEMU-TDX", "k3s-qemu-tdx", "kata-qemu-tdx"},
		{"K3s-QEMU-SNP-GPU", "k3s-qemu-snp+gpu", "kata-qemu-nvidia-gpu-snp"},
		{"RKE2-QEMU-TDX", "rke2-qemu-tdx", "kata-qemu-tdx"},
		{"AKS-CLH-SNP", "aks-cloud-hypervisor-snp", "kata-cc-isolation"},
		{"kata-cc-isolation", "aks-cloud-hypervisor-snp", "kata-cc-isolation"},
		{"kata-cc+debug", "aks-cloud-hypervisor-snp+debug", "kata-cc-isolation"},
		{"aks-clh-none", "aks-cloud-hypervisor-none", "kata-clh-azure"},
		{"kata-mshv-vm-isolation", "aks-cloud-hypervisor-none", "kata-clh-azure"},
		// Other spellings of the canonical form.
		{"k3s-clh-none", "k3s-cloud-hypervisor-none", "kata-clh"},
		{"k0s-fc-none+devmapper", "k0s-firecracker-none", "kata-fc"},
		{"  K3S-QEMU-SNP-GENOA+GPU ", "k3s-qemu-snp-genoa+gpu", "kata-qemu-nvidia-gpu-snp"},
		{"k3s-qemu-snp-genoa+overlayfs+debug+gpu", "k3s-qemu-snp-genoa+gpu+debug+overlayfs", "kata-qemu-nvidia-gpu-snp-debug"},
		{"k3s-qemu-snp+nydus", "k3s-qemu-snp", "kata-qemu-snp"},
		{"distribution=k3s,hypervisor=qemu,tee=snp,product=genoa,snapshotter=nydus,gpu=true", "k3s-qemu-snp-genoa+gpu", "kata-qemu-nvidia-gpu-snp"},
		{"dist=openshift, hv=qemu, tee=tdx", "openshift-qemu-tdx", "kata-qemu-tdx"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if p.String() != tt.want || p.KataRuntimeClass() != tt.class {
				t.Errorf("Parse(%q) = %s (%s), want %s (%s)", tt.in, p, p.KataRuntimeClass(), tt.want, tt.class)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in, rule string
		suggest  string // one expected suggestion, "" for any
	}{
		{"", "syntax", ""},
		{"k3s", "syntax", ""},
		{"k3s-qemu", "syntax", ""},
		{"k3s-qemu-sgx", "syntax", ""},
		{"k3s-qemu-snp-rome", "syntax", ""},
		{"k3s-qemu-snp+zfs", "syntax", ""},
		{"k3s-qemu-snp+gpu+gpu", "syntax", ""},
		{"k3s-qemu-snp+nydus+overlayfs", "syntax", ""},
		{"k3s-qemu-snp-genoa-milan", "syntax", ""},
		{"kata-qemu-fc", "syntax", ""},
		{"kata-fc-runtime-rs", "syntax", ""},
		{"k3s-qemu-snp+rust+go", "syntax", ""},
		{"distribution=k3s,hypervisor=qemu", "syntax", ""},
		{"distribution=k3s,hypervisor=qemu,tee=snp,gpu=maybe", "syntax", ""},
		{"distribution=k3s,dist=k0s,hypervisor=qemu,tee=none", "syntax", ""},
		{"k3s-qemu-tdx-genoa", "productline-snp-only", "k3s-qemu-snp-genoa"},
		{"kubeadm-firecracker-none+overlayfs", "fc-block-snapshotter", "kubeadm-firecracker-none"},
		{"kubeadm-firecracker-snp", "fc-no-tee", "kubeadm-firecracker-none"},
		{"kubeadm-firecracker-none+gpu", "gpu-qemu-only", "kubeadm-qemu-none+gpu"},
		{"k3s-clh-none+gpu", "gpu-qemu-only", "k3s-qemu-none+gpu"},
		{"k3s-clh-snp", "clh-tee-aks-only", "k3s-qemu-snp"},
		{"aks-qemu-snp", "aks-mshv", "aks-cloud-hypervisor-snp"},
		{"aks-clh-snp+rust", "aks-mshv", "aks-cloud-hypervisor-snp"},
		{"kubeadm-openvmm-none", "openvmm-aks-only", "aks-openvmm-none"},
		{"kubeadm-dragonball-none+go", "runtime-shipped", "kubeadm-dragonball-none"},
		{"kubeadm-firecracker-none+rust", "runtime-shipped", "kubeadm-firecracker-none"},
		{"kubeadm-dragonball-snp", "tee-gpu-shipped", "kubeadm-qemu-snp"},
		{"kubeadm-remote-snp", "remote-node-neutral", "kubeadm-remote-none"},
		{"kubeadm-qemu-snp+nvidia-cpu", "nvidia-cpu-plain", "kubeadm-qemu-none+nvidia-cpu"},
		{"aks-clh-snp-genoa", "aks-milan", "aks-cloud-hypervisor-snp-milan"},
		{"k3s-qemu-tdx+devmapper", "confidential-guest-pull", "k3s-qemu-tdx"},
		{"k3s-qemu-snp+erofs", "confidential-guest-pull", "k3s-qemu-snp"},
		{"k3s-clh-none+nydus", "guest-pull-dev-qemu-only", "k3s-qemu-none+nydus"},
		{"k3s-qemu-none+gpu+nydus", "guest-pull-dev-qemu-only", ""},
		{"openshift-qemu-snp+nydus", "crio-overlay-only", "openshift-qemu-snp"},
		{"AKS-QEMU-TDX-GPU", "aks-mshv", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Parse(tt.in)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse(%q) error = %v, want a *ValidationError", tt.in, err)
			}
			if ve.Rule.ID != tt.rule {
				t.Errorf("Parse(%q) broke %q, want %q: %v", tt.in, ve.Rule.ID, tt.rule, err)
			}
			if len(ve.Suggestions) == 0 || len(ve.Suggestions) > 3 {
				t.Errorf("Parse(%q): %d suggestions", tt.in, len(ve.Suggestions))
			}
			if tt.suggest != "" && !slices.Contains(ve.Suggestions, tt.suggest) {
				t.Errorf("Parse(%q) suggests %v, want %s among them", tt.in, ve.Suggestions, tt.suggest)
			}
			if !strings.Contains(err.Error(), "["+tt.rule+"]") {
				t.Errorf("message %q does not name the rule", err)
			}
		})
	}
}

func TestNewSpecComplete(t *testing.T) {
	for _, s := range []Spec{
		{},
		{Distribution: K3s, Hypervisor: QEMU},
		{Distribution: K3s, TEE: NoTEE},
		{Hypervisor: QEMU, TEE: NoTEE},
		{Distribution: 99, Hypervisor: QEMU, TEE: NoTEE},
		{Distribution: K3s, Hypervisor: QEMU, TEE: SNP, ProductLine: 42},
		{Distribution: K3s, Hypervisor: QEMU, TEE: SNP, Snapshotter: 42},
	} {
		_, err := New(s)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Rule.ID != "spec-complete" {
			t.Errorf("New(%+v) = %v, want rule spec-complete", s, err)
		}
	}
}

func TestZeroPlatformPanics(t *testing.T) {
	var z Platform
	if z.Valid() {
		t.Fatal("zero Platform is valid")
	}
	calls := map[string]func(){
		"Distribution":       func() { z.Distribution() },
		"Hypervisor":         func() { z.Hypervisor() },
		"TEE":                func() { z.TEE() },
		"ProductLine":        func() { z.ProductLine() },
		"Snapshotter":        func() { z.Snapshotter() },
		"DefaultSnapshotter": func() { z.DefaultSnapshotter() },
		"GPU":                func() { z.GPU() },
		"Debug":              func() { z.Debug() },
		"Confidential":       func() { z.Confidential() },
		"Spec":               func() { z.Spec() },
		"String":             func() { _ = z.String() },
		"Name":               func() { z.Name() },
		"MarshalText":        func() { _, _ = z.MarshalText() },
		"KataRuntimeClass":   func() { z.KataRuntimeClass() },
		"KataConfigFile":     func() { z.KataConfigFile() },
		"PodOverhead":        func() { z.PodOverhead() },
		"DefaultMemoryMiB":   func() { z.DefaultMemoryMiB() },
		"SharedFS":           func() { z.SharedFS() },
		"GuestPull":          func() { z.GuestPull() },
		"AppliesTo":          func() { AppliesTo(z) },
		"json.Marshal":       func() { _, _ = json.Marshal(z) },
	}
	for name, f := range calls {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatal("no panic")
				}
				if !strings.Contains(fmtAny(r), "use of zero Platform") {
					t.Errorf("panic %v does not explain itself", r)
				}
			}()
			f()
		})
	}
}

func fmtAny(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func TestMarshalling(t *testing.T) {
	p, err := Parse("k3s-qemu-snp-genoa+gpu")
	if err != nil {
		t.Fatal(err)
	}
	type doc struct {
		Platform  Platform    `json:"platform"`
		TEE       TEE         `json:"tee"`
		Hv        Hypervisor  `json:"hv"`
		Snap      Snapshotter `json:"snap"`
		Product   ProductLine `json:"product"`
		Dist      Distribution
		Platforms []Platform `json:"platforms"`
	}
	in := doc{p, TDX, CloudHypervisor, Erofs, Turin, OpenShift, All()[:3]}
	j, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(j), `"platform":"k3s-qemu-snp-genoa+gpu"`) || !strings.Contains(string(j), `"hv":"cloud-hypervisor"`) {
		t.Errorf("JSON %s", j)
	}
	var out doc
	if err := json.Unmarshal(j, &out); err != nil || !equalDoc(in, out) {
		t.Errorf("JSON round trip: %+v, %v", out, err)
	}
	y, err := yaml.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "platform: k3s-qemu-snp-genoa+gpu") {
		t.Errorf("YAML %s", y)
	}
	out = doc{}
	if err := yaml.Unmarshal(y, &out); err != nil || !equalDoc(in, out) {
		t.Errorf("YAML round trip: %+v, %v", out, err)
	}
	var bad doc
	if err := json.Unmarshal([]byte(`{"platform":"aks-qemu-tdx"}`), &bad); err == nil || !strings.Contains(err.Error(), "aks-mshv") {
		t.Errorf("unmarshal of an invalid platform: %v", err)
	}
	if _, err := json.Marshal(struct{ T TEE }{}); err == nil {
		t.Error("zero TEE marshalled")
	}
}

func equalDoc[T any](a, b T) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestDimensionParsers(t *testing.T) {
	for _, d := range Distributions() {
		if x, err := ParseDistribution(strings.ToUpper(d.String())); err != nil || x != d || d.Description() == "" {
			t.Errorf("distribution %v: %v %v", d, x, err)
		}
	}
	for _, h := range Hypervisors() {
		if x, err := ParseHypervisor(h.String()); err != nil || x != h || h.Description() == "" {
			t.Errorf("hypervisor %v: %v %v", h, x, err)
		}
		if x, err := ParseHypervisor(h.Short()); err != nil || x != h {
			t.Errorf("hypervisor short %v: %v %v", h.Short(), x, err)
		}
	}
	for _, v := range TEEs() {
		if x, err := ParseTEE(v.String()); err != nil || x != v || v.Description() == "" {
			t.Errorf("TEE %v: %v %v", v, x, err)
		}
	}
	for _, v := range append(ProductLines(), AnyProductLine) {
		if x, err := ParseProductLine(v.String()); err != nil || x != v || v.Description() == "" {
			t.Errorf("product line %v: %v %v", v, x, err)
		}
	}
	for _, v := range Snapshotters() {
		if x, err := ParseSnapshotter(v.String()); err != nil || x != v || v.Description() == "" {
			t.Errorf("snapshotter %v: %v %v", v, x, err)
		}
	}
	var zero struct {
		D Distribution
		H Hypervisor
		T TEE
		S Snapshotter
	}
	if zero.D.Valid() || zero.H.Valid() || zero.T.Valid() || zero.S.Valid() {
		t.Error("a zero dimension value is valid")
	}
	if !AnyProductLine.Valid() || ProductLine(9).Valid() {
		t.Error("product line validity")
	}
	for _, bad := range []string{"", "x", "qemu-kvm"} {
		if _, err := ParseHypervisor(bad); err == nil {
			t.Errorf("ParseHypervisor(%q) accepted", bad)
		}
	}
	if _, ok := Custom.Layout(); ok {
		t.Error("custom has a layout")
	}
	if OpenShift.Runtime() != CRIO || K3s.Runtime() != Containerd {
		t.Error("runtime from layout")
	}
	for _, d := range Distributions() {
		if _, ok := d.Layout(); ok != (d != Custom) {
			t.Errorf("%s: layout present = %v", d, ok)
		}
	}
}

func TestRulesTable(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Rules() {
		if r.ID == "" || r.Summary == "" || r.Source == "" || seen[r.ID] || !dnsLabel.MatchString(r.ID) {
			t.Errorf("bad or duplicate rule %+v", r)
		}
		seen[r.ID] = true
		if got, ok := RuleByID(r.ID); !ok || got != r {
			t.Errorf("RuleByID(%s)", r.ID)
		}
	}
	if len(checks())+3 != len(Rules()) {
		t.Errorf("%d checks for %d rules: every rule but syntax, spec-complete and non-x86-shim is a check", len(checks()), len(Rules()))
	}
}

func TestKataFacts(t *testing.T) {
	tests := []struct {
		in       string
		overhead Overhead
		mem      int
		sharedFS string
		pull     bool
	}{
		{"kata-qemu", Overhead{320, 250}, 2048, "virtio-fs", false},
		{"kata-clh", Overhead{130, 250}, 2048, "virtio-fs", false},
		{"kata-fc", Overhead{130, 250}, 2048, "none", false},
		{"kata-qemu-snp", Overhead{2048, 1000}, 2048, "none", true},
		{"kata-qemu-tdx+overlayfs", Overhead{2048, 1000}, 2048, "none", true},
		{"kata-qemu-coco-dev", Overhead{160, 250}, 2048, "none", true},
		{"kata-qemu-nvidia-gpu", Overhead{10240, 1000}, 8192, "virtio-fs", false},
		{"kata-qemu-nvidia-gpu-snp", Overhead{10240, 1000}, 8192, "none", true},
		{"kata-qemu-coco-dev-runtime-rs", Overhead{320, 250}, 2048, "none", true},
		{"kata-dragonball", Overhead{130, 250}, 2048, "inline-virtio-fs", false},
		{"kata-remote", Overhead{120, 250}, 2048, "none", true},
		// Contrast's AKS-CLH-SNP: tardev, 256 MiB plus the static
		// workload memory, nothing shared.
		{"kata-cc-isolation", Overhead{2048, 1000}, 256, "none", false},
		{"aks-clh-snp+nydus", Overhead{2048, 1000}, 256, "none", true},
	}
	for _, tt := range tests {
		p, err := Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if p.PodOverhead() != tt.overhead || p.DefaultMemoryMiB() != tt.mem || p.SharedFS() != tt.sharedFS || p.GuestPull() != tt.pull {
			t.Errorf("%s: overhead %+v mem %d sharedfs %s pull %v", tt.in, p.PodOverhead(), p.DefaultMemoryMiB(), p.SharedFS(), p.GuestPull())
		}
	}
	for in, want := range map[string]Snapshotter{
		"kata-fc": Devmapper, "kata-qemu-snp": Nydus, "kata-qemu-nvidia-gpu": Overlayfs, "kata-qemu": Overlayfs,
		"openshift-qemu-snp": Overlayfs, "aks-clh-snp": Tardev, "kata-clh-azure": Overlayfs, "kata-remote": Nydus, "openshift-remote-none": Overlayfs,
	} {
		if p, err := Parse(in); err != nil || p.Snapshotter() != want || p.DefaultSnapshotter() != want {
			t.Errorf("%s: default snapshotter %v (%v), want %v", in, p.Snapshotter(), err, want)
		}
	}
}

// TestAllFor checks that AllFor is All cut by distribution, in All's order.
func TestAllFor(t *testing.T) {
	var joined []Platform
	for _, d := range Distributions() {
		part := AllFor(d)
		for _, p := range part {
			if p.Distribution() != d {
				t.Fatalf("AllFor(%s) lists %s", d, p)
			}
		}
		joined = append(joined, part...)
	}
	if !slices.Equal(joined, All()) {
		t.Errorf("AllFor over the distributions (%d) is not All (%d)", len(joined), len(All()))
	}
}
