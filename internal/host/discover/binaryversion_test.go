package discover

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit"
)

func TestUpstreamVersion(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"1.6.20~ds1-1+deb12u3", "1.6.20", true},
		{"1:7.2+dfsg-7+deb12u18+b3", "7.2", true},
		{"1:8.2.2+ds-0ubuntu1", "8.2.2", true},
		{"1.7.25-1", "1.7.25", true},
		{"1.7.12-0ubuntu4.1", "1.7.12", true},
		{"2.0.0~rc.1-1", "2.0.0", true},
		{"1.10.1", "1.10.1", true},
		{"2.0+really1.9-1", "1.9", true},
		{"3.13.0-1.1", "3.13.0", true},
		{"git20240101-1", "", false},
		{"", "", false},
		{"1:", "", false},
	}
	for _, tt := range tests {
		got, ok := upstreamVersion(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("upstreamVersion(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

const sampleStatus = `Package: adduser
Status: install ok installed
Priority: important
Version: 3.134
Description: add and remove users and groups
 This package includes the 'adduser' and 'deluser' commands.
 .
 Package: not-a-field

Package: containerd
Status: hold ok installed
Architecture: amd64
Version: 1.6.20~ds1-1+deb12u3
Conffiles:
 /etc/containerd/config.toml 773cf1c5a249197a8ef37a08ac168414

Package: qemu-system-x86
Status: install ok half-installed
Architecture: amd64
Version: 1:7.2+dfsg-7+deb12u18+b3

Package: qemu-system-common
Status: deinstall ok config-files
Architecture: amd64
Version: 1:7.2+dfsg-7+deb12u18+b3

Package: virtiofsd
Status: install ok installed
Architecture: amd64
Version: 1.10.1-1

Package: virtiofsd
Status: install ok installed
Architecture: arm64
Version: 1.10.1-1
`

func TestScanDpkgStatus(t *testing.T) {
	wanted := map[string]bool{"containerd": true, "qemu-system-x86": true, "qemu-system-common": true, "virtiofsd": true}
	tests := []struct {
		name    string
		in      string
		want    map[string][]dpkgPackage
		wantErr string
	}{
		{"sample", sampleStatus, map[string][]dpkgPackage{
			"containerd": {{Name: "containerd", Arch: "amd64", Version: "1.6.20~ds1-1+deb12u3"}},
			"virtiofsd": {
				{Name: "virtiofsd", Arch: "amd64", Version: "1.10.1-1"},
				{Name: "virtiofsd", Arch: "arm64", Version: "1.10.1-1"},
			},
		}, ""},
		{"no trailing newline", "Package: containerd\nStatus: install ok installed\nVersion: 1.7.0-1", map[string][]dpkgPackage{
			"containerd": {{Name: "containerd", Version: "1.7.0-1"}},
		}, ""},
		{"no version", "Package: containerd\nStatus: install ok installed\n", map[string][]dpkgPackage{}, ""},
		{"empty", "", map[string][]dpkgPackage{}, ""},
		{"not key value", "Package: containerd\ngarbage line\n", nil, "line 2: expected Field: value"},
		{"missing blank line", "Package: a\nVersion: 1\nPackage: containerd\n", nil, "line 3: Package field in the middle of stanza"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := scanDpkgStatus(strings.NewReader(tt.in), wanted)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tt.want)
			if !bytes.Equal(gb, wb) {
				t.Errorf("got %s\nwant %s", gb, wb)
			}
		})
	}
}

func TestListContains(t *testing.T) {
	list := "/.\n/etc\n/usr/bin\n/usr/bin/containerd\n/usr/bin/containerd-shim\n"
	tests := []struct {
		paths []string
		want  bool
	}{
		{[]string{"/usr/bin/containerd"}, true},
		{[]string{"/bin/containerd", "/usr/bin/containerd"}, true},
		{[]string{"/usr/bin/containerd-shim-runc-v2"}, false},
		{[]string{"/usr/bin/container"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		got, err := listContains(strings.NewReader(list), tt.paths)
		if err != nil || got != tt.want {
			t.Errorf("listContains(%q) = %v, %v; want %v", tt.paths, got, err, tt.want)
		}
	}
}

func TestMarkerVersion(t *testing.T) {
	tests := []struct {
		name            string
		data            string
		marker          string
		parse           versionParser
		version, vendor string
		ok              bool
	}{
		{"qemu literal", "\x00abc\x00QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright (c) 2003-2022\x00x",
			"QEMU emulator version ", parseQEMUVersion, "7.2.22", "Debian 1:7.2+dfsg-7+deb12u18+b3", true},
		{"format string first", "QEMU emulator version %s\n\x00QEMU emulator version 9.1.2 (kata-static)\x00",
			"QEMU emulator version ", parseQEMUVersion, "9.1.2", "kata-static", true},
		{"NUL ends the line", "virtiofsd version 7.2.22\x00 (not this)\n",
			"virtiofsd version ", parseVirtiofsdVersion, "7.2.22", "", true},
		{"marker at the end", "xxQEMU emulator version ", "QEMU emulator version ", parseQEMUVersion, "", "", false},
		{"absent", "nothing here", "QEMU emulator version ", parseQEMUVersion, "", "", false},
		{"no marker", "QEMU emulator version 7.2.22", "", parseQEMUVersion, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, vendor, ok := markerVersion([]byte(tt.data), tt.marker, tt.parse)
			if v != tt.version || vendor != tt.vendor || ok != tt.ok {
				t.Errorf("got (%q, %q, %v), want (%q, %q, %v)", v, vendor, ok, tt.version, tt.vendor, tt.ok)
			}
		})
	}
}

func TestBuildInfoVersion(t *testing.T) {
	ctrd := upstreamContainerd
	tests := []struct {
		name        string
		main, mainV string
		ldflags     string
		modules     []string
		want        string
	}{
		{"go install", "github.com/containerd/containerd/v2", "v2.4.2", "", ctrd, "2.4.2"},
		{"devel", "github.com/containerd/containerd/v2", "(devel)", "", ctrd, ""},
		{"pseudo-version", "github.com/containerd/containerd/v2", "v0.0.0-20240101000000-abcdef123456", "", ctrd, ""},
		{"other module", "github.com/k3s-io/k3s", "v1.31.0+k3s1", "", ctrd, ""},
		{"ldflags", "github.com/containerd/containerd/v2", "(devel)",
			"-s -w -X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2 -X github.com/containerd/containerd/v2/version.Version=v2.0.2 -X github.com/containerd/containerd/v2/version.Revision=c507a02",
			ctrd, "2.0.2"},
		{"ldflags -X=", "", "", "-X=github.com/kata-containers/kata-containers/src/runtime/pkg/katautils.version=3.13.0",
			[]string{"github.com/kata-containers/kata-containers/src/runtime"}, "3.13.0"},
		{"ldflags quoted", "", "", `-X 'github.com/containerd/nydus-snapshotter/version.Version=v0.15.0'`,
			[]string{"github.com/containerd/nydus-snapshotter"}, "0.15.0"},
		{"ldflags other module", "", "", "-X github.com/containerd/containerd-fork/version.Version=v9.9.9", ctrd, ""},
		{"ldflags not a version", "", "", "-X github.com/containerd/containerd/version.Version=unknown", ctrd, ""},
		{"ldflags dangling -X", "", "", "-s -X", ctrd, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var settings [][2]string
			if tt.ldflags != "" {
				settings = append(settings, [2]string{"-ldflags", tt.ldflags})
			}
			got, ok := buildInfoVersion(tt.main, tt.mainV, settings, tt.modules)
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("got %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}

// writeELF writes a minimal 64-bit little-endian ELF file with one section
// per entry of sections (name, flags, data), enough for debug/elf.
func writeELF(t testing.TB, p string, sections []elfSection) {
	t.Helper()
	shstr := []byte{0}
	nameOff := make([]uint32, len(sections)+1)
	for i, s := range sections {
		nameOff[i] = uint32(len(shstr))
		shstr = append(append(shstr, s.name...), 0)
	}
	nameOff[len(sections)] = uint32(len(shstr))
	shstr = append(append(shstr, ".shstrtab"...), 0)

	var body bytes.Buffer
	const ehsize = 64
	offs := make([]uint64, len(sections)+1)
	for i, s := range sections {
		offs[i] = uint64(ehsize + body.Len())
		body.Write(s.data)
	}
	offs[len(sections)] = uint64(ehsize + body.Len())
	body.Write(shstr)
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	shoff := uint64(ehsize + body.Len())

	hdr := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Shoff: shoff, Ehsize: ehsize, Phentsize: 56, Shentsize: 64,
		Shnum: uint16(len(sections) + 2), Shstrndx: uint16(len(sections) + 1),
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	shdrs := []elf.Section64{{}}
	for i, s := range sections {
		shdrs = append(shdrs, elf.Section64{Name: nameOff[i], Type: uint32(elf.SHT_PROGBITS), Flags: uint64(s.flags),
			Off: offs[i], Size: uint64(len(s.data)), Addralign: 1})
	}
	shdrs = append(shdrs, elf.Section64{Name: nameOff[len(sections)], Type: uint32(elf.SHT_STRTAB),
		Off: offs[len(sections)], Size: uint64(len(shstr)), Addralign: 1})

	var out bytes.Buffer
	for _, v := range []any{hdr, body.Bytes(), shdrs} {
		if err := binary.Write(&out, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	mkFile(t, p, out.Bytes(), 0o755)
}

type elfSection struct {
	name  string
	flags elf.SectionFlag
	data  []byte
}

func mkFile(t testing.TB, p string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
}

// touchAfter changes p's ctime (chmod) until it is later than ref's mtime:
// file timestamps come from a coarse clock, so one chmod right after
// writing ref may get the same time.
func touchAfter(t testing.TB, p, ref string) {
	t.Helper()
	rst, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if err := os.Chmod(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if ct, _ := changeTime(st); ct.After(rst.ModTime()) {
			return
		}
	}
	t.Fatalf("ctime of %s never passed the mtime of %s", p, ref)
}

// staticHost builds a live-looking host tree: a merged /usr, QEMU with its
// version line in .rodata, a containerd and a CRI-O (not ELF) from
// packages, a hand-replaced virtiofsd, and an os-release.
func staticHost(t testing.TB) string {
	dir := t.TempDir()
	j := func(p string) string { return filepath.Join(dir, p) }
	if err := os.Symlink("usr/bin", j("bin")); err != nil {
		t.Fatal(err)
	}
	mkFile(t, j("etc/os-release"), []byte("NAME=\"Ubuntu\"\nID=ubuntu\n"), 0o644)
	writeELF(t, j("usr/bin/qemu-system-x86_64"), []elfSection{
		{".text", elf.SHF_ALLOC | elf.SHF_EXECINSTR, []byte("QEMU emulator version 1.0.0 (in code, not data)\x00")},
		{".data", elf.SHF_ALLOC | elf.SHF_WRITE, []byte("QEMU emulator version 2.0.0 (writable)\x00")},
		{".rodata", elf.SHF_ALLOC, []byte("\x00QEMU emulator version %s\n\x00QEMU emulator version 8.2.2 (Debian 1:8.2.2+ds-0ubuntu1)\nCopyright\x00")},
	})
	mkFile(t, j("usr/bin/containerd"), []byte("not a Go binary"), 0o755)
	mkFile(t, j("usr/bin/crio"), []byte("#!/bin/sh\n"), 0o755)
	mkFile(t, j("usr/libexec/virtiofsd"), []byte("rust"), 0o755)
	mkFile(t, j("var/lib/dpkg/status"), []byte(`Package: containerd
Status: install ok installed
Architecture: amd64
Version: 1.7.12-0ubuntu4.1

Package: cri-o
Status: install ok installed
Architecture: amd64
Version: 1.31.0-1

Package: virtiofsd
Status: install ok installed
Architecture: amd64
Version: 1.10.1-1

Package: qemu-system-x86
Status: install ok installed
Architecture: amd64
Version: 1:8.2.2+ds-0ubuntu1
`), 0o644)
	// The .list files are written after the binaries, as dpkg does.
	mkFile(t, j("var/lib/dpkg/info/containerd.list"), []byte("/.\n/usr\n/usr/bin\n/usr/bin/containerd\n"), 0o644)
	// Packages built before the /usr merge list /bin paths; multi-arch
	// ones name their list file with the architecture.
	mkFile(t, j("var/lib/dpkg/info/cri-o:amd64.list"), []byte("/.\n/bin\n/bin/crio\n"), 0o644)
	mkFile(t, j("var/lib/dpkg/info/virtiofsd.list"), []byte("/.\n/usr/libexec/virtiofsd\n"), 0o644)
	mkFile(t, j("var/lib/dpkg/info/qemu-system-x86.list"), []byte("/.\n/usr/bin/qemu-system-x86_64\n"), 0o644)
	// virtiofsd replaced by hand after the package installed it.
	touchAfter(t, j("usr/libexec/virtiofsd"), j("var/lib/dpkg/info/virtiofsd.list"))
	return dir
}

func TestStaticLookup(t *testing.T) {
	dir := staticHost(t)
	root, err := hostfs.NewLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	specs := binarySpecs("")
	l := newStaticLookup(&session{root: root}, specs)
	spec := func(name string) binarySpec {
		i := slices.IndexFunc(specs, func(s binarySpec) bool { return s.name == name })
		return specs[i]
	}
	tests := []struct {
		name, path, real string
		want             staticVersion
		ok               bool
	}{
		{"qemu", "usr/bin/qemu-system-x86_64", "usr/bin/qemu-system-x86_64",
			staticVersion{Version: "8.2.2", Vendor: "Debian 1:8.2.2+ds-0ubuntu1", From: fromFile}, true},
		{"containerd", "usr/bin/containerd", "usr/bin/containerd",
			staticVersion{Version: "1.7.12", Vendor: "Ubuntu 1.7.12-0ubuntu4.1", From: "package containerd"}, true},
		{"crio", "usr/bin/crio", "usr/bin/crio",
			staticVersion{Version: "1.31.0", Vendor: "Ubuntu 1.31.0-1", From: "package cri-o"}, true},
		{"crio", "bin/crio", "usr/bin/crio",
			staticVersion{Version: "1.31.0", Vendor: "Ubuntu 1.31.0-1", From: "package cri-o"}, true},
		{"virtiofsd", "usr/libexec/virtiofsd", "usr/libexec/virtiofsd", staticVersion{}, false},
		{"firecracker", "usr/bin/crio", "usr/bin/crio", staticVersion{}, false},
		{"containerd", "usr/bin/missing", "usr/bin/missing", staticVersion{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name+" "+tt.path, func(t *testing.T) {
			got, ok := l.lookup(spec(tt.name), tt.path, tt.real)
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestStaticVersionSnapshot takes a snapshot of the static host: the
// versions are recorded as probes, the binaries and the package database
// are not captured, and the snapshot replays the versions offline.
func TestStaticVersionSnapshot(t *testing.T) {
	dir := staticHost(t)
	live, err := hostfs.NewLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	rec := hostfs.NewRecorder(live)
	s := &session{root: rec}
	got := findBinaries(context.Background(), s, "")
	want := []facts.Binary{
		{Name: "qemu", Path: "/usr/bin/qemu-system-x86_64", Version: "8.2.2", Vendor: "Debian 1:8.2.2+ds-0ubuntu1", VersionFrom: "file"},
		{Name: "virtiofsd", Path: "/usr/libexec/virtiofsd"},
		{Name: "containerd", Path: "/usr/bin/containerd", Version: "1.7.12", Vendor: "Ubuntu 1.7.12-0ubuntu4.1", VersionFrom: "package containerd"},
		{Name: "crio", Path: "/usr/bin/crio", Version: "1.31.0", Vendor: "Ubuntu 1.31.0-1", VersionFrom: "package cri-o"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("live:\n got %+v\nwant %+v", got, want)
	}
	// The hand-replaced virtiofsd was run (and is not a binary).
	if !slices.ContainsFunc(s.unknown, func(m facts.Missing) bool {
		return m.Field == "binaries.virtiofsd.version" && strings.HasPrefix(m.Reason, facts.ReasonNotRun)
	}) {
		t.Errorf("virtiofsd: want a %s reason, got %+v", facts.ReasonNotRun, s.unknown)
	}

	c := rec.Capture()
	for _, e := range c.Entries {
		if e.Read && (strings.HasPrefix(e.Path, "usr/") || strings.HasPrefix(e.Path, "var/lib/dpkg")) {
			t.Errorf("snapshot captured the content of %s (%d bytes)", e.Path, len(e.Data))
		}
	}
	for _, b := range want[:1] {
		if _, ok := c.Recorded.Probes[versionProbe(b.Path)]; !ok {
			t.Errorf("no probe %s recorded; have %v", versionProbe(b.Path), c.Recorded.Probes)
		}
	}

	// Replay: a directory root with the recorded probes only.
	off := t.TempDir()
	rb, err := json.Marshal(c.Recorded)
	if err != nil {
		t.Fatal(err)
	}
	mkFile(t, filepath.Join(off, hostfs.RecordedFile), rb, 0o644)
	for _, b := range want {
		mkFile(t, filepath.Join(off, b.Path), nil, 0o644)
	}
	droot, err := hostfs.OpenDir(off)
	if err != nil {
		t.Fatal(err)
	}
	s = &session{root: droot}
	replayed := findBinaries(context.Background(), s, "")
	for i := range want {
		// virtiofsd's failed run was recorded too.
		want[i].Recorded = true
	}
	if !slices.Equal(replayed, want) {
		t.Fatalf("replayed:\n got %+v\nwant %+v", replayed, want)
	}
}

// qemuBinary is the Debian QEMU that .ci/tools.sh installs.
const qemuBinary = "/usr/bin/qemu-system-x86_64"

// TestFileVersionRealQEMU reads the version line from a real QEMU build.
func TestFileVersionRealQEMU(t *testing.T) {
	testkit.NeedsTools(t, "QEMU (Debian's qemu-system-x86)")
	if _, err := os.Stat(qemuBinary); err != nil {
		t.Fatalf("%v: this test needs Debian's qemu-system-x86 (installed by .ci/tools.sh)", err)
	}
	root, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	specs := binarySpecs("")
	l := newStaticLookup(&session{root: root}, specs)
	got, err := l.fromFile(specs[0], strings.TrimPrefix(qemuBinary, "/"))
	if err != nil {
		t.Fatal(err)
	}
	out := runVersion(t, qemuBinary)
	v, vendor, _ := parseQEMUVersion(out)
	if got.Version != v || got.Vendor != vendor {
		t.Errorf("from the file: %+v; %s --version: %q, %q", got, qemuBinary, v, vendor)
	}
}

func runVersion(t testing.TB, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --version: %v: %s", bin, err, out)
	}
	return string(out)
}

// TestLiveBinaryVersions checks discovery on this machine against what the
// binaries print: the static sources must agree with --version.
func TestLiveBinaryVersions(t *testing.T) {
	testkit.NeedsRoot(t, "virtiofsd --version (it calls setgroups)")
	root, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	s := &session{root: root}
	bins := findBinaries(context.Background(), s, "")
	wantFrom := map[string]string{
		"qemu":       fromFile,
		"virtiofsd":  fromFile,
		"containerd": "package containerd",
	}
	parsers := map[string]versionParser{"qemu": parseQEMUVersion, "virtiofsd": parseVirtiofsdVersion, "containerd": parseContainerdVersion}
	for name, from := range wantFrom {
		i := slices.IndexFunc(bins, func(b facts.Binary) bool { return b.Name == name })
		if i < 0 {
			t.Errorf("no %s found on the live root (.ci/tools.sh installs qemu-system-x86 and containerd); found %+v", name, bins)
			continue
		}
		b := bins[i]
		v, _, ok := parsers[name](runVersion(t, b.Path))
		if !ok {
			t.Errorf("%s --version did not parse", b.Path)
		}
		if b.Version != v || b.VersionFrom != from || b.Recorded {
			t.Errorf("%s: version %q from %q; want %q (as --version prints) from %q", name, b.Version, b.VersionFrom, v, from)
		}
	}
}

// BenchmarkStaticVersionLive measures the static version lookup of this
// machine's binaries (the package database scanned once per run, as in
// discovery).
func BenchmarkStaticVersionLive(b *testing.B) {
	root, err := hostfs.NewLive("/")
	if err != nil {
		b.Fatal(err)
	}
	specs := binarySpecs("")
	type target struct {
		spec binarySpec
		path string
	}
	var targets []target
	for _, sp := range specs {
		for _, p := range sp.files {
			if real, ok := resolveInRoot(root.FS(), p); ok && real == p {
				targets = append(targets, target{sp, p})
			}
		}
	}
	if len(targets) == 0 {
		b.Fatal("no binaries on this machine (.ci/tools.sh installs qemu-system-x86 and containerd)")
	}
	for b.Loop() {
		l := newStaticLookup(&session{root: root}, specs)
		for _, tg := range targets {
			if _, ok := l.lookup(tg.spec, tg.path, tg.path); !ok {
				b.Fatalf("no static version for /%s", tg.path)
			}
		}
	}
}

// TestBuildInfoVersionReal reads the build info of real containerd builds:
// the `go build` of containerd 2 that .ci/tools.sh makes (main module
// version) answers as --version does; Debian's -trimpath build has no
// main module version, so the build info source does not answer for it.
func TestBuildInfoVersionReal(t *testing.T) {
	testkit.NeedsTools(t, "the containerd 2 .ci/tools.sh builds (BERTH_CONTAINERD2)")
	ctrd2 := os.Getenv("BERTH_CONTAINERD2")
	if ctrd2 == "" {
		t.Fatal("BERTH_CONTAINERD2 is not set: run `make tools` (.ci/tools.sh) and source .ci/tools.env")
	}
	spec := binarySpecs("")[slices.IndexFunc(binarySpecs(""), func(s binarySpec) bool { return s.name == "containerd" })]
	tests := []struct {
		bin string
		ok  bool
	}{
		{ctrd2, true},
		{"/usr/bin/containerd", false},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.bin), func(t *testing.T) {
			root, err := hostfs.NewLive(filepath.Dir(tt.bin))
			if err != nil {
				t.Fatal(err)
			}
			got, err := newStaticLookup(&session{root: root}, nil).fromBuildInfo(spec, filepath.Base(tt.bin))
			if !tt.ok {
				if err == nil {
					t.Fatalf("got %+v, want no answer", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v, _, _ := parseContainerdVersion(runVersion(t, tt.bin))
			if got.Version != v || got.From != fromBuildInfo {
				t.Errorf("got %+v; %s --version says %q", got, tt.bin, v)
			}
		})
	}
}
