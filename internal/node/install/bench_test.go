package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/platform"
)

// bigRelease writes a one-component manifest whose file of size bytes is
// in a mirror directory.
func bigRelease(b *testing.B, size int) (*manifest.Manifest, string) {
	b.Helper()
	dir := b.TempDir()
	p := filepath.Join(dir, "big.img")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	h := sha256.New()
	chunk := content("big", "1", 1<<20)
	for n := 0; n < size; n += len(chunk) {
		f.Write(chunk)
		h.Write(chunk)
	}
	f.Close()
	y := fmt.Sprintf(`apiVersion: berth.dev/manifest/v1
name: big
version: "1"
components:
  - name: big
    version: "1"
    role: image
    sources: [%s/big.img]
    sha256: %s
    size: %d
    path: share/big.img
    mode: "0644"
`, offline, hex.EncodeToString(h.Sum(nil)), size)
	m, err := manifest.Parse([]byte(y), "big.yaml")
	if err != nil {
		b.Fatal(err)
	}
	return m, dir
}

// BenchmarkVerifyInstall installs a 256 MiB component from a --from
// directory (read, hash, write once); compare with BenchmarkSHA256File.
func BenchmarkVerifyInstall(b *testing.B) {
	const size = 256 << 20
	m, dir := bigRelease(b, size)
	p, _ := platform.Parse("kubeadm-qemu-none")
	b.SetBytes(size)
	for b.Loop() {
		e := newEnv(b)
		if d := os.Getenv("BERTH_BENCH_PREFIX_DIR"); d != "" {
			// Where the installation goes: the script puts it on tmpfs to
			// measure the installer rather than this machine's disk.
			tmp, err := os.MkdirTemp(d, "berth-bench-")
			if err != nil {
				b.Fatal(err)
			}
			e.prefix = tmp
		}
		in := e.installer(b, dir)
		in.Fetcher.Cache = ""
		install(b, in, m, p)
		b.StopTimer()
		os.RemoveAll(e.prefix)
		b.StartTimer()
	}
}

// BenchmarkSHA256File is the bound of BenchmarkVerifyInstall: hashing the
// same file.
func BenchmarkSHA256File(b *testing.B) {
	const size = 256 << 20
	_, dir := bigRelease(b, size)
	b.SetBytes(size)
	for b.Loop() {
		f, _ := os.Open(filepath.Join(dir, "big.img"))
		h := sha256.New()
		io.CopyBuffer(h, struct{ io.Reader }{f}, make([]byte, 1<<20))
		f.Close()
	}
}

// BenchmarkInstallNothingToDo re-runs an install that is complete: it
// must fetch nothing (asserted) and take well under 100 ms.
func BenchmarkInstallNothingToDo(b *testing.B) {
	rel := makeRelease(b, "1.0.0", offline, 1)
	e := newEnv(b)
	snp, _ := platform.Parse("kubeadm-qemu-snp")
	install(b, e.installer(b, rel.mirror(b)), rel.m, snp)
	in := e.installer(b)
	for b.Loop() {
		pl, err := in.Plan(rel.m, []platform.Platform{snp})
		if err != nil {
			b.Fatal(err)
		}
		res, err := in.Install(context.Background(), pl)
		if err != nil || res.Changed || res.Fetched != 0 {
			b.Fatalf("re-run: changed %v fetched %d err %v", res.Changed, res.Fetched, err)
		}
	}
}
