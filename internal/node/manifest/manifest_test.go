package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/platform"
)

const example = "../../../examples/manifest-kata.yaml"

func mustPlatform(t testing.TB, s string) platform.Platform {
	t.Helper()
	p, err := platform.Parse(s)
	if err != nil {
		t.Fatalf("platform %s: %v", s, err)
	}
	return p
}

func mustLoad(t testing.TB, path string) *Manifest {
	t.Helper()
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func names(cs []Component) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// common are the components every platform of the example gets.
var common = []string{"containerd-shim-kata-v2", "kata-runtime", "kata-monitor", "kata-configs", "kata-collect-data"}

func TestResolveExample(t *testing.T) {
	m := mustLoad(t, example)
	tests := []struct {
		platform string
		want     []string // besides common
		boot     []string // firmware, kernel, initrd ("" none), for confidential platforms
	}{
		{"kata-qemu", []string{"qemu", "qemu-data", "virtiofsd", "kernel", "image"}, nil},
		{"kata-clh", []string{"cloud-hypervisor", "virtiofsd", "kernel-uncompressed", "image"}, nil},
		{"kata-fc", []string{"firecracker", "jailer", "kernel-uncompressed", "image"}, nil},
		{"kata-qemu-nvidia-gpu", []string{"qemu", "qemu-data", "virtiofsd", "kernel-nvidia-gpu", "initrd-nvidia-gpu"}, nil},
		{"kata-qemu-snp", []string{"qemu", "qemu-data", "nydusd", "nydus-snapshotter", "ovmf-amdsev", "kernel-confidential", "initrd-confidential"},
			[]string{"ovmf-amdsev", "kernel-confidential", "initrd-confidential"}},
		{"k3s-qemu-snp-genoa", []string{"qemu", "qemu-data", "nydusd", "nydus-snapshotter", "ovmf-amdsev", "kernel-confidential", "initrd-confidential"},
			[]string{"ovmf-amdsev", "kernel-confidential", "initrd-confidential"}},
		{"kata-qemu-tdx", []string{"qemu", "qemu-data", "nydusd", "nydus-snapshotter", "ovmf-inteltdx", "kernel-confidential", "image-confidential"},
			[]string{"ovmf-inteltdx", "kernel-confidential", ""}},
		{"kata-qemu-nvidia-gpu-snp", []string{"qemu", "qemu-data", "nydusd", "nydus-snapshotter", "ovmf-amdsev", "kernel-nvidia-gpu-confidential", "initrd-nvidia-gpu-confidential"},
			[]string{"ovmf-amdsev", "kernel-nvidia-gpu-confidential", "initrd-nvidia-gpu-confidential"}},
		{"kata-qemu-nvidia-gpu-tdx", []string{"qemu", "qemu-data", "nydusd", "nydus-snapshotter", "ovmf-inteltdx", "kernel-nvidia-gpu-confidential", "initrd-nvidia-gpu-confidential"},
			[]string{"ovmf-inteltdx", "kernel-nvidia-gpu-confidential", "initrd-nvidia-gpu-confidential"}},
	}
	for _, tt := range tests {
		t.Run(tt.platform, func(t *testing.T) {
			p := mustPlatform(t, tt.platform)
			plan, err := m.Plan(p)
			if err != nil {
				t.Fatal(err)
			}
			got := names(plan.Components)
			want := append(slices.Clone(common), tt.want...)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("components:\n got %v\nwant %v", got, want)
			}
			for _, c := range plan.Components {
				if !c.Matches(p) {
					t.Errorf("%s resolved but does not match", c.Name)
				}
			}
			t.Logf("%-32s %2d of %d components, %4d of %d MiB = %5.1f%% of the manifest's bytes",
				p, len(plan.Components), len(m.Components), plan.Bytes>>20, plan.AllBytes>>20, 100*float64(plan.Bytes)/float64(plan.AllBytes))
			if tt.boot == nil {
				if plan.Boot != nil {
					t.Errorf("non-confidential platform has a boot: %+v", plan.Boot)
				}
				return
			}
			b := plan.Boot
			initrd := ""
			if b.Initrd != nil {
				initrd = b.Initrd.Name
			}
			if got := []string{b.Firmware.Name, b.Kernel.Name, initrd}; !slices.Equal(got, tt.boot) {
				t.Errorf("boot %v, want %v", got, tt.boot)
			}
			if b.Cmdline == "" {
				t.Error("empty command line")
			}
		})
	}
}

// TestResolveAllPlatforms resolves the example for every valid platform: no
// platform may get two components installing the same path, every QEMU
// confidential platform must have a measured boot, and each platform gets
// exactly one hypervisor.
func TestResolveAllPlatforms(t *testing.T) {
	m := mustLoad(t, example)
	for _, p := range platform.All() {
		need := []string{map[platform.KataRuntime]string{platform.GoRuntime: "bin/containerd-shim-kata-v2",
			platform.RustRuntime: "runtime-rs/bin/containerd-shim-kata-v2"}[p.KataRuntime()]}
		if b := p.HypervisorBinary(); b != "" {
			need = append(need, "bin/"+b)
		}
		cs, err := m.Installable(p, need)
		// The example (a kata-static release) ships no StratoVirt or
		// OpenVMM: those platforms must be refused, naming the binary.
		if h := p.Hypervisor(); h == platform.StratoVirt || h == platform.OpenVMM {
			if err == nil || !strings.Contains(err.Error(), p.HypervisorBinary()) {
				t.Errorf("%s: resolved without its hypervisor (%v)", p, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		hv, shims := 0, 0
		for _, c := range cs {
			switch c.Role {
			case RoleHypervisor:
				hv++
			case RoleShim:
				shims++
				if want := map[platform.KataRuntime]string{platform.GoRuntime: "bin/containerd-shim-kata-v2",
					platform.RustRuntime: "runtime-rs/bin/containerd-shim-kata-v2"}[p.KataRuntime()]; c.Path != want {
					t.Errorf("%s: shim %s at %s, want %s", p, c.Name, c.Path, want)
				}
			}
		}
		// Dragonball lives in the Rust shim, peer pods run in a cloud.
		want := 1
		if p.HypervisorBinary() == "" {
			want = 0
		}
		if hv != want || shims != 1 {
			t.Errorf("%s: %d hypervisors (want %d), %d shims", p, hv, want, shims)
		}
		if p.Confidential() && p.Hypervisor() == platform.QEMU {
			if _, err := m.Boot(p); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
	}
}

func TestBootErrors(t *testing.T) {
	base := mustLoad(t, "testdata/vectors.yaml")
	dup := *base
	dup.Components = append(slices.Clone(base.Components), base.Components[2])
	dup.Components[len(dup.Components)-1].Name = "kernel-two"
	dup.Components[len(dup.Components)-1].Path = "share/kata-containers/other"
	twoCmd := *base
	twoCmd.Measured = append(slices.Clone(base.Measured), Measured{KernelCmdline: "x"})
	noCmd := *base
	noCmd.Measured = nil
	noFw := *base
	noFw.Components = base.Components[2:]
	samePath := *base
	samePath.Components = append(slices.Clone(base.Components), base.Components[0])
	samePath.Components[len(samePath.Components)-1].Name = "again"
	tests := []struct {
		name     string
		m        *Manifest
		platform string
		want     string
	}{
		{"non-confidential", base, "kata-qemu", "has no TEE"},
		{"two kernels", &dup, "kata-qemu-snp", "2 components with role kernel (kernel, kernel-two)"},
		{"two command lines", &twoCmd, "kata-qemu-snp", "measured entries [0 2]"},
		{"no command line", &noCmd, "kata-qemu-tdx", "no measured entry serves"},
		{"no firmware", &noFw, "kata-qemu-snp", "no component with role firmware"},
		{"same install path", &samePath, "kata-qemu-snp", "both install share/ovmf/OVMF.amdsev.fd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.m.Boot(mustPlatform(t, tt.platform))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestSelector(t *testing.T) {
	tests := []struct {
		serves string
		yes    []string
		no     []string
	}{
		{`{}`, []string{"kata-qemu", "kata-fc", "kata-qemu-snp"}, nil},
		{`{tee: [snp, tdx]}`, []string{"kata-qemu-snp", "kata-qemu-tdx"}, []string{"kata-qemu"}},
		{`{tee: none, hypervisor: [clh, fc]}`, []string{"kata-clh", "kata-fc"}, []string{"kata-qemu", "kata-qemu-snp"}},
		{`{productLine: [genoa, Bergamo]}`, []string{"k3s-qemu-snp-genoa"}, []string{"k3s-qemu-snp-milan", "kata-qemu-snp"}},
		{`{gpu: true}`, []string{"kata-qemu-nvidia-gpu"}, []string{"kata-qemu"}},
		{`{gpu: false, debug: false}`, []string{"kata-qemu"}, []string{"kata-qemu-nvidia-gpu", "kata-qemu+debug"}},
		{`{distribution: K3s, snapshotter: nydus}`, []string{"k3s-qemu-snp"}, []string{"kubeadm-qemu-snp", "k3s-qemu-none"}},
	}
	for _, tt := range tests {
		t.Run(tt.serves, func(t *testing.T) {
			js, err := yamlToJSON(tt.serves)
			if err != nil {
				t.Fatal(err)
			}
			s, err := parseSelector(js, "serves")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tt.yes {
				if !s.Matches(mustPlatform(t, p)) {
					t.Errorf("%s should match", p)
				}
			}
			for _, p := range tt.no {
				if s.Matches(mustPlatform(t, p)) {
					t.Errorf("%s should not match", p)
				}
			}
		})
	}
}

func TestSHA256Forms(t *testing.T) {
	const hexsum = "68f32ce96bf7c40d5e068e8fd58f355af3c8cf9dedba209dcd56483213e8f9ad"
	for _, in := range []string{hexsum, strings.ToUpper(hexsum), "sha256:" + hexsum, "sha256-aPMs6Wv3xA1eBo6P1Y81WvPIz53tuiCdzVZIMhPo+a0="} {
		got, err := ParseSHA256(in)
		if err != nil || got != hexsum {
			t.Errorf("ParseSHA256(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "abc", hexsum + "00", "sha256-aPMs6Wv3xA1eBo6P1Y81WvPIz53tuiCdzVZIMhPo", "sha512-aPMs6Wv3xA1eBo6P1Y81WvPIz53tuiCdzVZIMhPo+a0=", "md5:" + hexsum} {
		if got, err := ParseSHA256(in); err == nil {
			t.Errorf("ParseSHA256(%q) = %q, want an error", in, got)
		}
	}
}

func TestDigestAndRoundTrip(t *testing.T) {
	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(data, "example")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Digest(), "sha256:") || len(m.Digest()) != 7+64 {
		t.Errorf("digest %q", m.Digest())
	}
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Parse(js, "round trip")
	if err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if !reflect.DeepEqual(m.Components, m2.Components) || !reflect.DeepEqual(m.Measured, m2.Measured) {
		t.Error("JSON round trip changed the manifest")
	}
	if m.Digest() == m2.Digest() {
		t.Error("digest ignores the bytes")
	}
}

func TestParseRef(t *testing.T) {
	const h = "3e4fd0b3fe3b2dbe481c3d9e99418a034174f26cbe1f55aa212b0f18c12d2d6f"
	tests := []struct {
		in      string
		want    Ref
		wantErr string
	}{
		{in: "m.yaml", want: Ref{Location: "m.yaml"}},
		{in: "dir/m.yaml@sha256:" + strings.ToUpper(h), want: Ref{Location: "dir/m.yaml", SHA256: h}},
		{in: "https://example.invalid/m.yaml@sha256:" + h, want: Ref{Location: "https://example.invalid/m.yaml", SHA256: h, Remote: true}},
		{in: "", wantErr: "empty"},
		{in: "https://example.invalid/m.yaml", wantErr: "not pinned"},
		{in: "https://example.invalid/m.yaml@sha256:abc", wantErr: "not a SHA-256 digest"},
		{in: "@sha256:" + h, wantErr: "nothing before"},
		{in: "ftp://example.invalid/m.yaml", wantErr: "local path or an http(s) URL"},
		{in: "https://@sha256:" + h, wantErr: "with a host"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRef(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseRef = %+v, %v; want %+v", got, err, tt.want)
			}
			if r2, err := ParseRef(got.String()); err != nil || r2 != got {
				t.Errorf("String() does not round trip: %q", got.String())
			}
		})
	}
}

func TestLoadRef(t *testing.T) {
	data, err := os.ReadFile("testdata/vectors.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := Parse(data, "x")
	if err != nil {
		t.Fatal(err)
	}
	pin := strings.TrimPrefix(m.Digest(), "sha256:")
	if _, err := LoadRef(Ref{Location: "testdata/vectors.yaml", SHA256: pin}); err != nil {
		t.Errorf("pinned local load: %v", err)
	}
	wrong := strings.Repeat("0", 64)
	if _, err := LoadRef(Ref{Location: "testdata/vectors.yaml", SHA256: wrong}); err == nil || !strings.Contains(err.Error(), "pins "+wrong) {
		t.Errorf("wrong pin: %v", err)
	}
	if _, err := LoadRef(Ref{Location: "https://example.invalid/m.yaml", SHA256: pin, Remote: true}); err == nil || !strings.Contains(err.Error(), "arrives with berth install") {
		t.Errorf("remote: %v", err)
	}
	if _, err := LoadRef(Ref{Location: "testdata/missing.yaml"}); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing: %v", err)
	}
}

func TestStoreFind(t *testing.T) {
	m := mustLoad(t, "testdata/vectors.yaml")
	kernel := m.Components[2]
	src, err := os.ReadFile("../refvalues/testdata/kernel-synthetic.bin")
	if err != nil {
		t.Fatal(err)
	}
	byDigest, byName, cache, wrong := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	write := func(p string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(byDigest, kernel.SHA256), src)
	write(filepath.Join(byName, "kernel-synthetic.bin"), src)
	write(filepath.Join(cache, "sha256", kernel.SHA256), src)
	write(filepath.Join(wrong, "kernel-synthetic.bin"), append(src[:len(src):len(src)], 0))
	tests := []struct {
		name    string
		store   Store
		want    string
		wantErr string
	}{
		{"by digest first", Store{Dirs: []string{byName, byDigest}}, filepath.Join(byDigest, kernel.SHA256), ""},
		{"by install path base name", Store{Dirs: []string{byName}}, filepath.Join(byName, "kernel-synthetic.bin"), ""},
		{"cache before names", Store{Dirs: []string{byName}, Cache: cache}, filepath.Join(cache, "sha256", kernel.SHA256), ""},
		{"wrong content", Store{Dirs: []string{wrong, byName}}, "", "component kernel: " + filepath.Join(wrong, "kernel-synthetic.bin") + " has sha256 "},
		{"not found", Store{Dirs: []string{t.TempDir()}, Cache: cache + "/none"}, "", "not found as <sha256>, kernel-synthetic.bin, kernel in"},
		{"nowhere", Store{}, "", "pass --from DIR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.store.Find(kernel)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				if tt.name == "wrong content" && !strings.Contains(err.Error(), "expected sha256 "+kernel.SHA256) {
					t.Errorf("error lacks the expected digest: %v", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Find = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
