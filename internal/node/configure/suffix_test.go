package configure

import (
	"strings"
	"testing"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/platform"
)

func TestParseSuffix(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Suffix
		wantErr string // substring of the error, "" when valid
	}{
		{in: "", want: ""},
		{in: "a", want: "a"},
		{in: "blue", want: "blue"},
		{in: "v3-24", want: "v3-24"},
		{in: "0", want: "0"},
		{in: strings.Repeat("a", MaxSuffixLen), want: Suffix(strings.Repeat("a", MaxSuffixLen))},
		{in: strings.Repeat("a", MaxSuffixLen+1), wantErr: "22 characters, expected at most 21"},
		{in: "Blue", wantErr: "lower-case letters"},
		{in: "-a", wantErr: "starting and ending"},
		{in: "a-", wantErr: "starting and ending"},
		{in: "a_b", wantErr: "lower-case letters"},
		{in: "a.b", wantErr: "lower-case letters"},
		{in: "a/b", wantErr: "lower-case letters"},
		{in: "../x", wantErr: "lower-case letters"},
		{in: "a b", wantErr: "lower-case letters"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSuffix("--install-suffix", tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--install-suffix") {
					t.Fatalf("ParseSuffix(%q) = %q, %v; want an error naming the flag and containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSuffix(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestSuffixNames(t *testing.T) {
	p, err := platform.Parse("kubeadm-qemu-snp")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s                                          Suffix
		handler, class, prefix, block, label, kata string
	}{
		{"", p.Handler(), p.KataRuntimeClass(), "/opt/berth", p.Name(), "berth.dev/installed." + p.Name(), "/opt/berth/etc/kata/" + p.Name() + ".toml"},
		{"blue", p.Handler() + "-blue", p.KataRuntimeClass() + "-blue", "/opt/berth-blue", p.Name() + "-blue",
			"berth.dev/installed." + p.Name() + "-blue", "/opt/berth-blue/etc/kata/" + p.Name() + "-blue.toml"},
	} {
		t.Run(string(tc.s), func(t *testing.T) {
			ps := Paths{Prefix: tc.s.Prefix(), Suffix: tc.s}
			got := []string{tc.s.Handler(p), tc.s.RuntimeClass(p), tc.s.Prefix(), tc.s.Block(p), tc.s.InstalledLabel(p), ps.KataConfig(p)}
			want := []string{tc.handler, tc.class, tc.prefix, tc.block, tc.label, tc.kata}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("name %d: got %q, want %q", i, got[i], want[i])
				}
			}
		})
	}
}

// TestSuffixFitsEveryPlatform holds MaxSuffixLen to its promise: with the
// longest suffix every platform's handler and RuntimeClass stay DNS
// labels; only node label keys may not, and Check says so.
func TestSuffixFitsEveryPlatform(t *testing.T) {
	s := Suffix(strings.Repeat("x", MaxSuffixLen))
	long := 0
	for _, p := range platform.All() {
		for what, n := range map[string]string{"handler": s.Handler(p), "RuntimeClass": s.RuntimeClass(p)} {
			if len(n) > 63 {
				t.Errorf("%s: %s %s is %d characters", p, what, n, len(n))
			}
			long = max(long, len(n))
		}
		err := s.Check(p)
		key := strings.TrimPrefix(s.InstalledLabel(p), "berth.dev/")
		if (len(key) > 63) != (err != nil) {
			t.Errorf("%s: label key name %s (%d characters): Check = %v", p, key, len(key), err)
		}
		if err != nil && !strings.Contains(err.Error(), "installed label") {
			t.Errorf("%s: Check = %v, want it to name the installed label", p, err)
		}
	}
	if long != 63 {
		t.Errorf("the longest suffixed name is %d characters: MaxSuffixLen %d is not the largest that fits", long, MaxSuffixLen)
	}
}

// TestRenderSuffixesDisjoint renders one platform for two suffixes and no
// suffix: no file berth owns outright, and no block, may be shared, or
// removing one install would take the other's away.
func TestRenderSuffixesDisjoint(t *testing.T) {
	for _, tc := range []struct{ plat, layout string }{
		{"kubeadm-qemu-snp", "kubeadm"},
		{"k3s-qemu-tdx", "k3s"},
		{"kubeadm-qemu-none+nydus", "kubeadm"},
	} {
		t.Run(tc.plat, func(t *testing.T) {
			p, err := platform.Parse(tc.plat)
			if err != nil {
				t.Fatal(err)
			}
			owned := map[string]Suffix{}
			blocks := map[string]Suffix{}
			for _, s := range []Suffix{"", "a", "b"} {
				r, err := Render(p, Target{LayoutName: tc.layout, Layout: platform.Layouts()[tc.layout], ConfigVersion: 3},
					Options{Paths: Paths{Suffix: s}})
				if err != nil {
					t.Fatal(err)
				}
				if r.Handler != s.Handler(p) {
					t.Errorf("suffix %q: handler %s, want %s", s, r.Handler, s.Handler(p))
				}
				if !strings.Contains(string(r.RuntimeClass), "name: "+s.RuntimeClass(p)+"\n") ||
					!strings.Contains(string(r.RuntimeClass), "handler: "+s.Handler(p)+"\n") {
					t.Errorf("suffix %q: RuntimeClass:\n%s", s, r.RuntimeClass)
				}
				for _, f := range r.Host {
					switch {
					case f.Kind == Owned:
						if o, dup := owned[f.Path]; dup {
							t.Errorf("suffixes %q and %q both own %s", o, s, f.Path)
						}
						owned[f.Path] = s
						if s != "" && !strings.Contains(f.Path, string(s)) {
							t.Errorf("suffix %q: owned file %s does not carry the suffix", s, f.Path)
						}
					case f.BlockID != "imports":
						k := f.Path + "#" + f.BlockID
						if o, dup := blocks[k]; dup {
							t.Errorf("suffixes %q and %q both own block %s", o, s, k)
						}
						blocks[k] = s
					}
					if s != "" && strings.Contains(string(f.Content), "/opt/berth/") {
						t.Errorf("suffix %q: %s names the unsuffixed prefix:\n%s", s, f.Path, f.Content)
					}
				}
			}
		})
	}
}

func TestRenderRefusesLongLabel(t *testing.T) {
	var p platform.Platform
	for _, q := range platform.All() {
		if strings.HasPrefix(q.Name(), "kubeadm-") && (p == platform.Platform{} || len(q.Name()) > len(p.Name())) {
			p = q
		}
	}
	s := Suffix(strings.Repeat("x", 10))
	_, err := Render(p, Target{LayoutName: "kubeadm", Layout: platform.Layouts()["kubeadm"], ConfigVersion: 3}, Options{Paths: Paths{Suffix: s}})
	if err == nil || !strings.Contains(err.Error(), "more than 63") {
		t.Fatalf("Render(%s, suffix %s) = %v, want a refusal naming the 63-character limit", p, s, err)
	}
}

// TestLabelNamesMatchAPI holds configure's spelling of the label prefix and
// the install-status annotation to the API package's, which configure
// does not import (it would link apimachinery into berth).
func TestLabelNamesMatchAPI(t *testing.T) {
	if labelPrefix != v1alpha1.LabelPrefix {
		t.Errorf("labelPrefix %q, v1alpha1.LabelPrefix %q", labelPrefix, v1alpha1.LabelPrefix)
	}
	if installStatusAnnotation != v1alpha1.InstallStatusAnnotation {
		t.Errorf("installStatusAnnotation %q, v1alpha1.InstallStatusAnnotation %q", installStatusAnnotation, v1alpha1.InstallStatusAnnotation)
	}
	if got := Suffix("").StatusAnnotation(); got != v1alpha1.InstallStatusAnnotation {
		t.Errorf("StatusAnnotation() = %q", got)
	}
}
