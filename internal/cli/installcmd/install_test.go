package installcmd

import (
	"berth.dev/berth/internal/cli"

	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// cliRelease is a small release for the CLI tests: the shim, QEMU, SNP
// firmware and kernel, a config archive, and a Cloud Hypervisor that SNP on
// QEMU must not get.
type cliRelease struct {
	files    map[string][]byte
	manifest string
}

func makeCLIRelease(t *testing.T, base string) cliRelease {
	t.Helper()
	return makeCLIReleaseWithNydus(t, base, nil)
}

// makeCLIReleaseWithNydus is makeCLIRelease whose nydus-snapshotter
// component is nydus (the real containerd-nydus-grpc), or filler when nil.
func makeCLIReleaseWithNydus(t *testing.T, base string, nydus []byte) cliRelease {
	t.Helper()
	r := cliRelease{files: map[string][]byte{}}
	var y strings.Builder
	y.WriteString("apiVersion: berth.dev/manifest/v1\nname: kata-cli-test\nversion: \"1.0.0\"\ncomponents:\n")
	add := func(name, file, serves, rest string, data []byte) {
		r.files[file] = data
		sum := sha256.Sum256(data)
		fmt.Fprintf(&y, "  - name: %s\n    version: \"1\"\n    sources: [%s/%s]\n    sha256: sha256:%s\n    size: %d\n%s", name, base, file, hex.EncodeToString(sum[:]), len(data), rest)
		if serves != "" {
			fmt.Fprintf(&y, "    serves: %s\n", serves)
		}
	}
	blob := func(name string, n int) []byte {
		return bytes.Repeat([]byte(name+"\n"), n/(len(name)+1)+1)[:n]
	}
	add("containerd-shim-kata-v2", "containerd-shim-kata-v2", "", "    path: bin/containerd-shim-kata-v2\n    mode: \"0755\"\n", blob("shim", 200_000))
	add("qemu", "qemu", "{hypervisor: qemu}", "    path: bin/qemu-system-x86_64\n    mode: \"0755\"\n", blob("qemu", 150_000))
	add("cloud-hypervisor", "cloud-hypervisor", "{hypervisor: cloud-hypervisor}", "    path: bin/cloud-hypervisor\n    mode: \"0755\"\n", blob("clh", 90_000))
	add("ovmf-amdsev", "AMDSEV.fd", "{hypervisor: qemu, tee: snp}", "    role: firmware\n    path: share/ovmf/AMDSEV.fd\n    mode: \"0644\"\n", blob("ovmf", 64_000))
	add("kernel-confidential", "vmlinuz-confidential", "{tee: [snp, tdx]}", "    role: kernel\n    path: share/kata-containers/vmlinuz-confidential.container\n    mode: \"0644\"\n", blob("kernel", 80_000))
	if nydus == nil {
		nydus = blob("nydus", 40_000)
	}
	// Where berth's nydus-snapshotter unit runs it from.
	add("nydus-snapshotter", "containerd-nydus-grpc", "{snapshotter: nydus}", "    role: snapshotter\n    path: bin/containerd-nydus-grpc\n    mode: \"0755\"\n", nydus)
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	cfg := blob("config", 3000)
	tw.WriteHeader(&tar.Header{Name: "./opt/kata/share/defaults/kata-containers/configuration-qemu-snp.toml", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(cfg))})
	tw.Write(cfg)
	tw.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw.Bytes())
	zw.Close()
	add("kata-configs", "kata-configs.tar.gz", "", "    archive:\n      type: tar.gz\n      members:\n        - {name: ./opt/kata/share/defaults/kata-containers/configuration-qemu-snp.toml, path: share/defaults/kata-containers/configuration-qemu-snp.toml, mode: \"0644\"}\n", gz.Bytes())
	r.manifest = y.String()
	return r
}

func (r cliRelease) write(t *testing.T) (manifestPath, mirror string) {
	t.Helper()
	mirror = t.TempDir()
	for n, d := range r.files {
		os.WriteFile(filepath.Join(mirror, n), d, 0o644)
	}
	manifestPath = filepath.Join(t.TempDir(), "manifest.yaml")
	os.WriteFile(manifestPath, []byte(r.manifest), 0o644)
	return manifestPath, mirror
}

// copyInstallRoot copies the SNP Genoa k3s fixture host, which the install
// writes into (prefix, cache, runtime configuration).
func copyInstallRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join(hostsDir, "snp-genoa-k3s-ready"))); err != nil {
		t.Fatal(err)
	}
	return root
}

func assertSNPLayout(t *testing.T, root string, rel cliRelease) {
	t.Helper()
	prefix := filepath.Join(root, "opt/berth")
	for file, path := range map[string]string{
		"containerd-shim-kata-v2": "bin/containerd-shim-kata-v2",
		"qemu":                    "bin/qemu-system-x86_64",
		"AMDSEV.fd":               "share/ovmf/AMDSEV.fd",
		"vmlinuz-confidential":    "share/kata-containers/vmlinuz-confidential.container",
		"containerd-nydus-grpc":   "bin/containerd-nydus-grpc",
	} {
		got, err := os.ReadFile(filepath.Join(prefix, path))
		if err != nil || !bytes.Equal(got, rel.files[file]) {
			t.Errorf("%s: not installed correctly (%v)", path, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(prefix, "bin/qemu-system-x86_64")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("qemu mode: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(prefix, "bin/cloud-hypervisor")); err == nil {
		t.Error("cloud-hypervisor installed for SNP on QEMU")
	}
	if _, err := os.Stat(filepath.Join(prefix, "share/defaults/kata-containers/configuration-qemu-snp.toml")); err != nil {
		t.Errorf("archive member: %v", err)
	}
}

func TestInstallCLIOffline(t *testing.T) {
	rel := makeCLIRelease(t, "http://127.0.0.1:9/unplugged")
	mp, mirror := rel.write(t)
	root := copyInstallRoot(t)
	args := []string{"--root", root, "install", "-p", "k3s-qemu-snp", "-m", mp, "--from", mirror}

	code, out, errOut := runCheckCLI(t, append(args, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "qemu") || strings.Contains(out, "cloud-hypervisor") || !strings.Contains(out, "to download 0 B") {
		t.Fatalf("dry-run: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "opt/berth")); err == nil {
		t.Fatal("dry-run created the prefix")
	}

	code, out, errOut = runCheckCLI(t, args...)
	if code != 0 || !strings.Contains(out, "installed k3s-qemu-snp") || !strings.Contains(errOut, "not verifying") {
		t.Fatalf("install: exit %d\n%s\n%s", code, out, errOut)
	}
	assertSNPLayout(t, root, rel)
	st, err := os.ReadFile(filepath.Join(root, "var/lib/berth/config-state.json"))
	if err != nil || !strings.Contains(string(st), "k3s-qemu-snp") {
		t.Fatalf("runtime configuration not applied: %v %s", err, st)
	}
	kc, err := os.ReadFile(filepath.Join(root, "opt/berth/etc/kata/k3s-qemu-snp.toml"))
	if err != nil || !strings.Contains(string(kc), "/opt/berth/") {
		t.Errorf("Kata configuration: %v", err)
	}

	// Nothing to do: nothing fetched, and fast.
	start := time.Now()
	code, out, errOut = runCheckCLI(t, append(args, "-o", "json")...)
	took := time.Since(start)
	var sum installSummary
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "{") && strings.Contains(line, `"prefix"`) {
			if err := json.Unmarshal([]byte(line), &sum); err != nil {
				t.Fatalf("summary line %q: %v", line, err)
			}
		}
	}
	if code != 0 || sum.Changed || sum.Fetched != 0 {
		t.Fatalf("re-run: exit %d %+v\n%s", code, sum, errOut)
	}
	t.Logf("re-run with nothing to do through the CLI (discovery included): %v", took)

	code, _, errOut = runCheckCLI(t, "--root", root, "rollback")
	if code != cli.ExitNotReady || !strings.Contains(errOut, "no previous installation") {
		t.Errorf("rollback: exit %d %s", code, errOut)
	}

	code, out, errOut = runCheckCLI(t, "--root", root, "uninstall", "--purge-cache")
	if code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("uninstall: exit %d\n%s\n%s", code, out, errOut)
	}
	if _, err := os.Lstat(filepath.Join(root, "opt/berth/current")); err == nil {
		t.Error("current still there after uninstall")
	}
	if _, err := os.Stat(filepath.Join(root, "opt/berth/etc/kata/k3s-qemu-snp.toml")); err == nil {
		t.Error("the Kata configuration berth applied is still there")
	}
	if st, _ := os.ReadFile(filepath.Join(root, "var/lib/berth/config-state.json")); strings.Contains(string(st), "k3s-qemu-snp") {
		t.Errorf("config state still names the platform: %s", st)
	}
}

func TestInstallCLIFlakyServerAndBundle(t *testing.T) {
	var mu sync.Mutex
	n := 0
	var rel cliRelease
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		fail := n%2 == 0
		data, ok := rel.files[strings.TrimPrefix(r.URL.Path, "/")]
		mu.Unlock()
		switch {
		case !ok:
			http.NotFound(w, r)
		case fail && r.Header.Get("Range") == "":
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data[:len(data)/2])
		case fail:
			http.Error(w, "busy", http.StatusBadGateway)
		default:
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
		}
	}))
	defer srv.Close()
	mu.Lock()
	rel = makeCLIRelease(t, srv.URL)
	rel.files["manifest.yaml"] = []byte(rel.manifest)
	mu.Unlock()
	mp, _ := rel.write(t)
	msum := sha256.Sum256([]byte(rel.manifest))
	murl := srv.URL + "/manifest.yaml@sha256:" + hex.EncodeToString(msum[:])

	// Bundle from the flaky server, with a fresh cache.
	bundle := filepath.Join(t.TempDir(), "berth-bundle.tar")
	cache := filepath.Join(t.TempDir(), "cache")
	code, out, errOut := runCheckCLI(t, "bundle", "-p", "k3s-qemu-snp", "-p", "k3s-qemu-tdx", "-m", murl, "--cache", cache, "-o", bundle)
	if code != 0 || !strings.Contains(out, "wrote "+bundle) {
		t.Fatalf("bundle: exit %d\n%s\n%s", code, out, errOut)
	}
	// Install from the flaky server directly (the cache is warm, so use
	// another root and cache).
	root := copyInstallRoot(t)
	code, out, errOut = runCheckCLI(t, "--root", root, "install", "-p", "k3s-qemu-snp", "-m", mp, "--cache", filepath.Join(t.TempDir(), "c2"))
	if code != 0 {
		t.Fatalf("install from the flaky server: exit %d\n%s\n%s", code, out, errOut)
	}
	assertSNPLayout(t, root, rel)
	mu.Lock()
	if n < 8 {
		t.Errorf("only %d requests: the server did not fail half of them", n)
	}
	mu.Unlock()

	// Air gap: the server is gone; the bundle carries manifest and files.
	srv.Close()
	root2 := copyInstallRoot(t)
	code, out, errOut = runCheckCLI(t, "--root", root2, "install", "-p", "k3s-qemu-snp", "--from", bundle, "--no-config")
	if code != 0 || !strings.Contains(out, "installed k3s-qemu-snp") {
		t.Fatalf("install from the bundle: exit %d\n%s\n%s", code, out, errOut)
	}
	assertSNPLayout(t, root2, rel)
}

func TestInstallCLIRefusals(t *testing.T) {
	rel := makeCLIRelease(t, "http://127.0.0.1:9/x")
	mp, mirror := rel.write(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no platform", []string{"install", "-m", mp}, cli.ExitUsage, "--platform is required"},
		{"no manifest", []string{"install", "-p", "k3s-qemu-snp"}, cli.ExitUsage, "--manifest is required"},
		{"platform not ready", []string{"--root", filepath.Join(hostsDir, "cloud-vm-no-nested"), "install", "-p", "kubeadm-qemu-snp", "-m", mp, "--from", mirror}, cli.ExitNotReady, "--force"},
		{"bad --from", []string{"install", "-p", "k3s-qemu-snp", "-m", mp, "--from", "/nonexistent"}, cli.ExitUsage, "--from /nonexistent"},
		{"relative prefix", []string{"install", "-p", "k3s-qemu-snp", "-m", mp, "--prefix", "opt/berth"}, cli.ExitUsage, "absolute path"},
		{"bundle without output", []string{"bundle", "-p", "k3s-qemu-snp", "-m", mp}, cli.ExitUsage, "-o bundle.tar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCheckCLI(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d (want %d), stderr %s", code, tc.code, errOut)
			}
		})
	}
}
