package discover

import (
	"os"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
)

// versionParsers maps each tool to its parser, for the tests and the fuzz
// target.
var versionParsers = []struct {
	tool  string
	parse versionParser
}{
	{"qemu", parseQEMUVersion},
	{"cloud-hypervisor", parseCloudHypervisorVersion},
	{"firecracker", parseFirecrackerVersion},
	{"virtiofsd", parseVirtiofsdVersion},
	{"containerd", parseContainerdVersion},
	{"crio", parseCRIOVersion},
	{"kata", parseKataVersion},
	{"nydus", parseNydusVersion},
	{"stratovirt", parseStratoVirtVersion},
	{"openvmm", parseOpenVMMVersion},
}

func TestParseVersions(t *testing.T) {
	tests := []struct {
		name    string
		parse   versionParser
		out     string
		version string
		vendor  string
		ok      bool
	}{
		{"qemu debian", parseQEMUVersion, "QEMU emulator version 8.2.2 (Debian 1:8.2.2+ds-0ubuntu1)\nCopyright (c) 2003-2023 Fabrice Bellard and the QEMU Project developers\n", "8.2.2", "Debian 1:8.2.2+ds-0ubuntu1", true},
		{"qemu kata-static", parseQEMUVersion, "QEMU emulator version 9.1.2 (kata-static)\n", "9.1.2", "kata-static", true},
		{"qemu upstream", parseQEMUVersion, "QEMU emulator version 10.1.0\nCopyright (c) 2003-2025\n", "10.1.0", "", true},
		{"qemu git build", parseQEMUVersion, "QEMU emulator version 8.0.50 (v8.0.0-2041-g4b19dd6c8d)\n", "8.0.50", "v8.0.0-2041-g4b19dd6c8d", true},
		{"qemu garbage", parseQEMUVersion, "qemu-system-x86_64: unrecognised option\n", "", "", false},
		{"cloud-hypervisor", parseCloudHypervisorVersion, "cloud-hypervisor v41.0.0\n", "41.0.0", "", true},
		{"cloud-hypervisor dirty", parseCloudHypervisorVersion, "cloud-hypervisor v38.0.0-dirty\n", "38.0.0", "", true},
		{"firecracker", parseFirecrackerVersion, "Firecracker v1.10.1\n\n", "1.10.1", "", true},
		{"virtiofsd", parseVirtiofsdVersion, "virtiofsd backend 1.10.1\n", "1.10.1", "", true},
		{"virtiofsd old", parseVirtiofsdVersion, "virtiofsd 1.5.0\n", "1.5.0", "", true},
		{"virtiofsd qemu C", parseVirtiofsdVersion, "virtiofsd version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright (c) 2003-2022 Fabrice Bellard and the QEMU Project developers\nusing FUSE kernel interface version 7.31\n", "7.2.22", "Debian 1:7.2+dfsg-7+deb12u18+b3", true},
		{"containerd 2", parseContainerdVersion, "containerd github.com/containerd/containerd/v2 v2.0.2 c507a0257ea6462fbd6f5ba4f5c74facb04021f4\n", "2.0.2", "", true},
		{"containerd.io", parseContainerdVersion, "containerd containerd.io 1.7.25 bcc810d6b9066471b0b6fa75f557a15a1cbf31bb\n", "1.7.25", "containerd.io", true},
		{"containerd k3s", parseContainerdVersion, "containerd github.com/k3s-io/containerd v1.7.23-k3s2 \n", "1.7.23", "github.com/k3s-io/containerd", true},
		{"containerd ubuntu", parseContainerdVersion, "containerd github.com/containerd/containerd 1.7.12 \n", "1.7.12", "", true},
		{"crio multi-line", parseCRIOVersion, "crio version 1.31.0\nVersion:        1.31.0\nGitCommit:      3d1ba8e\n", "1.31.0", "", true},
		{"crio new", parseCRIOVersion, "INFO[0000] Starting CRI-O\nVersion:        1.32.1\nGitCommit:      abc\n", "1.32.1", "", true},
		{"kata-runtime", parseKataVersion, "kata-runtime  : 3.13.0\n   commit   : 0e9b5f2\n   OCI specs: 1.2.0\n", "3.13.0", "", true},
		{"kata shim go", parseKataVersion, `Kata Containers containerd shim (Golang): id: "io.containerd.kata.v2", version: 3.13.0, commit: 0e9b5f2` + "\n", "3.13.0", "", true},
		{"kata shim rust", parseKataVersion, "Kata Containers containerd shim (Rust): id: io.containerd.kata.v2, version: 3.16.0, commit: abc\n", "3.16.0", "", true},
		{"nydus", parseNydusVersion, "Version: \tv0.15.0\nRevision: \t2c5ae0a\nGo version: \tgo1.22.5\n", "0.15.0", "", true},
		{"stratovirt -V", parseStratoVirtVersion, "StratoVirt 2.4.0\n", "2.4.0", "", true},
		{"stratovirt help text", parseStratoVirtVersion, "A light kvm-based hypervisor.\n", "", "", false},
		{"openvmm", parseOpenVMMVersion, "openvmm 0.1.0\n", "0.1.0", "", true},
		{"empty", parseNydusVersion, "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, vendor, ok := tt.parse(tt.out)
			if v != tt.version || vendor != tt.vendor || ok != tt.ok {
				t.Errorf("got (%q, %q, %v), want (%q, %q, %v)", v, vendor, ok, tt.version, tt.vendor, tt.ok)
			}
		})
	}
}

// FuzzVersion feeds every tool's version parser the same input: none may
// panic, and a version, when found, is always dotted numbers.
func FuzzVersion(f *testing.F) {
	f.Fuzz(func(t *testing.T, out string) {
		for _, p := range versionParsers {
			v, vendor, ok := p.parse(out)
			if ok != (v != "") {
				t.Fatalf("%s: ok=%v with version %q", p.tool, ok, v)
			}
			if ok && !versionShape.MatchString(v) {
				t.Fatalf("%s: version %q is not dotted numbers", p.tool, v)
			}
			if len(vendor) > len(out) {
				t.Fatalf("%s: vendor %q longer than the input", p.tool, vendor)
			}
		}
	})
}

func TestResolveInRoot(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(target, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	mk("usr/bin/qemu-system-x86_64")
	mk("opt/kata/bin/kata-runtime")
	ln("usr/bin", "bin")
	ln("/opt/kata/bin/kata-runtime", "usr/local/bin/kata-runtime")
	ln("../../../../../etc/passwd", "usr/local/bin/escape")
	ln("loop", "usr/local/bin/loop")
	root, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"bin/qemu-system-x86_64", "usr/bin/qemu-system-x86_64"},
		{"usr/local/bin/kata-runtime", "opt/kata/bin/kata-runtime"},
		{"usr/local/bin/escape", ""},
		{"usr/local/bin/loop", ""},
		{"usr/bin/missing", ""},
	}
	for _, tt := range tests {
		got, ok := resolveInRoot(root.FS(), tt.in)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("resolveInRoot(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
}
