package install

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/platform"
)

// release is a generated test release: a manifest whose files exist, with
// real digests.
type release struct {
	// files maps the download name to its bytes.
	files map[string][]byte
	// installed maps an install path to its bytes and mode.
	installed map[string]installedFile
	yaml      string
	m         *manifest.Manifest
}

type installedFile struct {
	data []byte
	mode fs.FileMode
}

// content is deterministic bytes for a component of a release version.
func content(name, version string, size int) []byte {
	seed := sha256.Sum256([]byte(name + "@" + version))
	out := make([]byte, 0, size)
	for len(out) < size {
		seed = sha256.Sum256(seed[:])
		out = append(out, seed[:]...)
	}
	return out[:size]
}

type member struct {
	name, path, mode string
	data             []byte
}

func tarball(t testing.TB, typ string, ms []member) []byte {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	tw.WriteHeader(&tar.Header{Name: "./opt/kata/", Typeflag: tar.TypeDir, Mode: 0o755})
	for _, m := range ms {
		tw.WriteHeader(&tar.Header{Name: m.name, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(m.data))})
		tw.Write(m.data)
	}
	tw.WriteHeader(&tar.Header{Name: "./opt/kata/README", Typeflag: tar.TypeReg, Mode: 0o644, Size: 5})
	tw.Write([]byte("hello"))
	tw.Close()
	switch typ {
	case "tar.gz":
		var b bytes.Buffer
		gz := gzip.NewWriter(&b)
		gz.Write(raw.Bytes())
		gz.Close()
		return b.Bytes()
	case "tar.zst":
		var b bytes.Buffer
		zw, err := zstd.NewWriter(&b)
		if err != nil {
			t.Fatal(err)
		}
		zw.Write(raw.Bytes())
		zw.Close()
		return b.Bytes()
	}
	return raw.Bytes()
}

// plainSpec describes a plain component of the test release.
type plainSpec struct {
	name, role, path, mode, serves string
	size                           int
}

// makeRelease builds release version ver whose sources are under baseURL
// (e.g. a loopback server, or a closed port for offline tests). scale
// multiplies the plain files' sizes.
func makeRelease(t testing.TB, ver, baseURL string, scale int) *release {
	t.Helper()
	r := &release{files: map[string][]byte{}, installed: map[string]installedFile{}}
	var y strings.Builder
	fmt.Fprintf(&y, "apiVersion: berth.dev/manifest/v1\nname: kata-test\nversion: %q\ncomponents:\n", ver)
	comp := func(name, version, role, file string, data []byte, serves, rest string) {
		sum := sha256.Sum256(data)
		r.files[file] = data
		fmt.Fprintf(&y, "  - name: %s\n    version: %q\n    role: %s\n    sources: [%s/%s]\n    sha256: %s\n    size: %d\n",
			name, version, role, baseURL, file, hex.EncodeToString(sum[:]), len(data))
		if serves != "" {
			fmt.Fprintf(&y, "    serves: %s\n", serves)
		}
		y.WriteString(rest)
	}
	for _, p := range []plainSpec{
		{"containerd-shim-kata-v2", "shim", "bin/containerd-shim-kata-v2", "0755", "", 300_000},
		{"qemu", "hypervisor", "bin/qemu-system-x86_64", "0755", "{hypervisor: qemu}", 200_000},
		{"cloud-hypervisor", "hypervisor", "bin/cloud-hypervisor", "0755", "{hypervisor: cloud-hypervisor}", 150_000},
		{"virtiofsd", "virtiofsd", "libexec/virtiofsd", "0755", "{hypervisor: [qemu, cloud-hypervisor], tee: none}", 60_000},
		{"ovmf-amdsev", "firmware", "share/ovmf/AMDSEV.fd", "0644", "{hypervisor: qemu, tee: snp}", 100_000},
		{"ovmf-tdx", "firmware", "share/ovmf/OVMF.inteltdx.fd", "0644", "{hypervisor: qemu, tee: tdx}", 100_000},
		{"kernel-confidential", "kernel", "share/kata-containers/vmlinuz-confidential.container", "0644", "{tee: [snp, tdx]}", 120_000},
		{"kernel", "kernel", "share/kata-containers/vmlinuz.container", "0644", "{tee: none}", 110_000},
		// berth's nydus-snapshotter unit runs it (the confidential
		// platforms' default snapshotter).
		{"nydus-snapshotter", "snapshotter", "bin/containerd-nydus-grpc", "0755", "{snapshotter: nydus}", 50_000},
	} {
		data := content(p.name, ver, p.size*scale)
		comp(p.name, ver, p.role, p.name, data, p.serves, fmt.Sprintf("    path: %s\n    mode: %q\n", p.path, p.mode))
		mode, _ := parseTestMode(p.mode)
		r.installed["["+p.name+"]"+p.path] = installedFile{data, mode}
	}
	for _, a := range []struct {
		name, typ, serves string
		members           []member
	}{
		{"kata-configs", "tar.gz", "", []member{
			{"./opt/kata/share/defaults/kata-containers/configuration-qemu-snp.toml", "share/defaults/kata-containers/configuration-qemu-snp.toml", "0644", content("cfg-snp", ver, 3000)},
			{"./opt/kata/share/defaults/kata-containers/configuration-clh.toml", "share/defaults/kata-containers/configuration-clh.toml", "0644", content("cfg-clh", ver, 2000)},
		}},
		{"qemu-data", "tar.zst", "{hypervisor: qemu}", []member{
			{"./opt/kata/share/kata-qemu/qemu/bios-256k.bin", "share/kata-qemu/qemu/bios-256k.bin", "0644", content("bios", ver, 40_000)},
			{"opt/kata/share/kata-qemu/qemu/kvmvapic.bin", "share/kata-qemu/qemu/kvmvapic.bin", "0640", content("kvmvapic", ver, 9000)},
		}},
		{"tools", "tar", "", []member{
			{"./opt/kata/bin/kata-runtime", "bin/kata-runtime", "0755", content("kata-runtime", ver, 20_000)},
		}},
	} {
		file := a.name + "." + a.typ
		data := tarball(t, a.typ, a.members)
		var rest strings.Builder
		fmt.Fprintf(&rest, "    archive:\n      type: %s\n      members:\n", a.typ)
		for _, m := range a.members {
			fmt.Fprintf(&rest, "        - {name: %s, path: %s, mode: %q}\n", m.name, m.path, m.mode)
			mode, _ := parseTestMode(m.mode)
			r.installed["["+a.name+"]"+m.path] = installedFile{m.data, mode}
		}
		role := "config"
		if a.name != "kata-configs" {
			role = "data"
		}
		comp(a.name, ver, role, file, data, a.serves, rest.String())
	}
	r.yaml = y.String()
	m, err := manifest.Parse([]byte(r.yaml), "test-manifest-"+ver+".yaml")
	if err != nil {
		t.Fatalf("test manifest: %v\n%s", err, r.yaml)
	}
	r.m = m
	return r
}

func parseTestMode(s string) (fs.FileMode, error) {
	var v uint32
	_, err := fmt.Sscanf(s, "%o", &v)
	return fs.FileMode(v), err
}

// mirror writes the release's files into a new directory.
func (r *release) mirror(t testing.TB) string {
	t.Helper()
	d := t.TempDir()
	for n, data := range r.files {
		if err := os.WriteFile(filepath.Join(d, n), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// expect returns the install paths and contents platform p must get.
func (r *release) expect(t testing.TB, ps ...platform.Platform) map[string]installedFile {
	t.Helper()
	out := map[string]installedFile{}
	for _, p := range ps {
		cs, err := r.m.Resolve(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			for k, v := range r.installed {
				if name, path, _ := strings.Cut(strings.TrimPrefix(k, "["), "]"); name == c.Name {
					out[path] = v
				}
			}
		}
	}
	return out
}

// assertInstalled checks that prefix's current installation has exactly
// the files want (through the stable top-level links, as the runtime sees
// them), with their modes, and nothing else.
func assertInstalled(t testing.TB, prefix string, want map[string]installedFile) {
	t.Helper()
	for p, f := range want {
		full := filepath.Join(prefix, filepath.FromSlash(p))
		got, err := os.ReadFile(full)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("%s: wrong content (%d bytes, want %d)", p, len(got), len(f.data))
		}
		fi, _ := os.Stat(full)
		if fi.Mode().Perm() != f.mode {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), f.mode)
		}
	}
	cur := filepath.Join(prefix, currentLink)
	n := 0
	filepath.WalkDir(cur+"/", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Errorf("walking: %v", err)
			return nil
		}
		rel, _ := filepath.Rel(cur, p)
		if d.IsDir() && rel == recordDir {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			n++
			if _, ok := want[filepath.ToSlash(rel)]; !ok {
				t.Errorf("unexpected file %s in the installation", rel)
			}
		}
		return nil
	})
	if n != len(want) {
		t.Errorf("%d files installed, want %d", n, len(want))
	}
}

// assertNoTemp fails on any temporary file left under the dirs.
func assertNoTemp(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			n := e.Name()
			if strings.HasSuffix(n, ".partial") || strings.HasPrefix(n, stagePrefix) || strings.Contains(n, ".tmp-") {
				t.Errorf("temporary file left: %s", p)
			}
			return nil
		})
	}
}

type env struct {
	prefix, cache string
}

func newEnv(t testing.TB) env {
	d := t.TempDir()
	return env{prefix: filepath.Join(d, "opt", "berth"), cache: filepath.Join(d, "cache")}
}

func (e env) installer(t testing.TB, from ...string) *Installer {
	t.Helper()
	ls, _, err := Locators(from)
	if err != nil {
		t.Fatal(err)
	}
	f := fetch.New(ls, e.cache)
	f.Backoff, f.MaxBackoff, f.IdleTimeout, f.Attempts = time.Millisecond, 4*time.Millisecond, 5*time.Second, 8
	return &Installer{Layout: Layout{Root: hostRoot(t), Prefix: e.prefix}, Fetcher: f, Parallel: 4}
}

func mustPlatform(t testing.TB, s string) platform.Platform {
	t.Helper()
	p, err := platform.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func install(t testing.TB, in *Installer, m *manifest.Manifest, ps ...platform.Platform) *Result {
	t.Helper()
	pl, err := in.Plan(m, ps)
	if err != nil {
		t.Fatal(err)
	}
	res, err := in.Install(context.Background(), pl)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// releaseServer serves a release; fail decides, per request number, to
// fail it (with a 503, a truncated body or a reset) instead.
type releaseServer struct {
	*httptest.Server
	mu       sync.Mutex
	n        int
	served   int64
	ranges   []string
	paths    []string
	release  func() *release
	override func(n int, w http.ResponseWriter, r *http.Request) bool
}

func newReleaseServer(t testing.TB) *releaseServer {
	s := &releaseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := s.n
		s.n++
		s.paths = append(s.paths, r.URL.Path)
		if rg := r.Header.Get("Range"); rg != "" {
			s.ranges = append(s.ranges, r.URL.Path+" "+rg)
		}
		rel, ov := s.release, s.override
		s.mu.Unlock()
		if ov != nil && ov(n, w, r) {
			return
		}
		data, ok := rel().files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		cw := &countWriter{ResponseWriter: w}
		http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(data))
		s.mu.Lock()
		s.served += cw.n
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *releaseServer) stats() (requests int, served int64, ranges []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.served, append([]string(nil), s.ranges...)
}

type countWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// set replaces the server's behaviour while it runs.
func (s *releaseServer) set(rel func() *release, override func(n int, w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rel != nil {
		s.release = rel
	}
	s.override = override
}

// hostRoot is this machine's / opened for writing, as berth install
// without --root opens it; closed with the test.
func hostRoot(t testing.TB) *hostfs.Writable {
	t.Helper()
	w, err := hostfs.OpenWritable("/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}
