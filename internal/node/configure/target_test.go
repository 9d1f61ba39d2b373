package configure

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/platform"
)

// TestNewInstall: the install target defaults its prefix from the suffix,
// refuses what the flags got wrong with a usage error naming the flag, and
// derives every name of the install from the one value.
func TestNewInstall(t *testing.T) {
	snp := mustParse(t, "kubeadm-qemu-snp")
	long := mustParse(t, "microk8s-cloud-hypervisor-none+debug+rust+devmapper")
	for _, tc := range []struct {
		name  string
		f     InstallFlags
		plats []platform.Platform
		want  Install
		err   string
	}{
		{"defaults", InstallFlags{}, []platform.Platform{snp}, Install{Prefix: "/opt/berth"}, ""},
		{"suffixed default prefix", InstallFlags{Suffix: "blue"}, []platform.Platform{snp}, Install{Suffix: "blue", Prefix: "/opt/berth-blue"}, ""},
		{"prefix as given", InstallFlags{Suffix: "blue", Prefix: "/srv/kata"}, nil, Install{Suffix: "blue", Prefix: "/srv/kata"}, ""},
		{"kata config dir", InstallFlags{KataConfigDir: "/etc/kata-containers"}, nil, Install{Prefix: "/opt/berth", KataConfigDir: "/etc/kata-containers"}, ""},
		{"relative prefix", InstallFlags{Prefix: "opt/x"}, nil, Install{}, `--prefix "opt/x": expected an absolute path`},
		{"relative kata config dir", InstallFlags{KataConfigDir: "etc/kata"}, nil, Install{}, `--kata-config-dir "etc/kata": expected an absolute path`},
		{"suffix not a DNS label", InstallFlags{Suffix: "Blue_1"}, nil, Install{}, "--install-suffix \"Blue_1\""},
		{"suffix too long", InstallFlags{Suffix: strings.Repeat("a", MaxSuffixLen+1)}, nil, Install{}, "--install-suffix"},
		{"suffix too long for a platform", InstallFlags{Suffix: "ab"}, []platform.Platform{snp, long}, Install{}, "berth.dev/installed.microk8s-cloud-hypervisor-none-debug-rust-devmapper-ab would be 64 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NewInstall(tc.f, tc.plats...)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || errdefs.ExitCode(err) != errdefs.ExitUsage {
					t.Fatalf("err %v (exit %d), want a usage error saying %q", err, errdefs.ExitCode(err), tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("NewInstall = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestInstallNames: every name of a suffixed install comes from its
// Suffix, and Render takes the validated Paths as they are.
func TestInstallNames(t *testing.T) {
	p := mustParse(t, "kubeadm-qemu-snp+nydus")
	in, err := NewInstall(InstallFlags{Suffix: "blue"}, p)
	if err != nil {
		t.Fatal(err)
	}
	ps := in.Paths("")
	for _, c := range []struct{ what, got, want string }{
		{"handler", in.Suffix.Handler(p), "kata-qemu-snp-blue"},
		{"RuntimeClass", in.Suffix.RuntimeClass(p), "kata-qemu-snp-blue"},
		{"installed label", in.Suffix.InstalledLabel(p), "berth.dev/installed.kubeadm-qemu-snp-blue"},
		{"field manager", in.Suffix.FieldManager(), "berth-node-installer-blue"},
		{"status annotation", in.Suffix.StatusAnnotation(), "berth.dev/install-status-blue"},
		{"Kata config", ps.KataConfig(p), "/opt/berth-blue/etc/kata/kubeadm-qemu-snp-blue.toml"},
		{"nydus proxy", NydusNamesFor(ps).Proxy, "berth-nydus-blue"},
		{"nydus binary", NydusNamesFor(ps).Binary, "/opt/berth-blue/" + NydusBinary},
		// Paths built by hand default the prefix the same way.
		{"nydus binary, unvalidated paths", NydusNamesFor(Paths{Suffix: "blue"}).Binary, "/opt/berth-blue/" + NydusBinary},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	r, err := Render(p, targetFor(t, "kubeadm", 3), Options{Paths: ps})
	if err != nil || r.Handler != "kata-qemu-snp-blue" || !strings.Contains(string(r.Host[0].Content), "/opt/berth-blue/") {
		t.Fatalf("Render: %v, handler %q", err, r.Handler)
	}
}
