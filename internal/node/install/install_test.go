package install

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/platform"
)

// offline is a base URL nothing listens on: the network is unplugged.
const offline = "http://127.0.0.1:9/kata"

func TestInstallOfflineFromMirror(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	mirror := rel.mirror(t)
	e := newEnv(t)
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	in := e.installer(t, mirror)
	res := install(t, in, rel.m, snp)
	if !res.Changed || res.Fetched != 0 {
		t.Errorf("first install: changed %v fetched %d, want a change fetching nothing (local mirror)", res.Changed, res.Fetched)
	}
	assertInstalled(t, e.prefix, rel.expect(t, snp))
	assertNoTemp(t, e.prefix, e.cache)
	want := []string{"containerd-shim-kata-v2", "qemu", "ovmf-amdsev", "kernel-confidential", "nydus-snapshotter", "kata-configs", "qemu-data", "tools"}
	var got []string
	for _, c := range res.Plan.Components {
		got = append(got, c.Name)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("components %v, want %v", got, want)
	}
	// The stable links and the record.
	if tgt, _ := os.Readlink(filepath.Join(e.prefix, "bin")); tgt != "current/bin" {
		t.Errorf("bin -> %q, want current/bin", tgt)
	}
	st, err := in.Layout.Status()
	if err != nil || st.Current == nil || st.Current.ID != res.Plan.ID || st.Previous != nil {
		t.Fatalf("status %+v err %v", st, err)
	}
	if st.Current.Platforms[0] != snp.String() {
		t.Errorf("record platforms %v", st.Current.Platforms)
	}

	// A re-run does nothing and fetches nothing. How long it takes is the
	// benchmarks' business, not a test's.
	res = install(t, e.installer(t), rel.m, snp)
	if res.Changed || res.Fetched != 0 {
		t.Errorf("re-run: changed %v fetched %d", res.Changed, res.Fetched)
	}
}

func TestInstallFromServerFailingHalfItsRequests(t *testing.T) {
	s := newReleaseServer(t)
	rel := makeRelease(t, "1.0.0", s.URL, 2)
	s.set(func() *release { return rel }, func(n int, w http.ResponseWriter, r *http.Request) bool {
		data := rel.files[strings.TrimPrefix(r.URL.Path, "/")]
		switch n % 6 {
		case 1:
			http.Error(w, "try later", http.StatusServiceUnavailable)
		case 3: // truncated body
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data[:len(data)/2])
		case 5: // connection reset
			conn, buf, _ := w.(http.Hijacker).Hijack()
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(data))
			buf.Write(data[:len(data)/3])
			buf.Flush()
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
		default:
			return false
		}
		return true
	})
	e := newEnv(t)
	snp := mustPlatform(t, "k3s-qemu-snp")
	res := install(t, e.installer(t), rel.m, snp)
	assertInstalled(t, e.prefix, rel.expect(t, snp))
	assertNoTemp(t, e.prefix, e.cache)
	n, served, ranges := s.stats()
	if n <= len(res.Plan.Components) || len(ranges) == 0 {
		t.Errorf("%d requests, ranges %v: the faults did not happen", n, ranges)
	}
	if res.Fetched < res.Plan.Bytes {
		t.Errorf("fetched %d < plan %d", res.Fetched, res.Plan.Bytes)
	}
	t.Logf("%d requests, %d bytes served for %d needed", n, served, res.Plan.Bytes)

	// A second platform: only its own components are requested; the
	// others come from the cache.
	s.mu.Lock()
	mark := len(s.paths)
	s.mu.Unlock()
	clh := mustPlatform(t, "k3s-clh-none")
	res2 := install(t, e.installer(t), rel.m, clh)
	s.mu.Lock()
	asked := s.paths[mark:]
	s.mu.Unlock()
	for _, p := range asked {
		if p != "/cloud-hypervisor" && p != "/virtiofsd" && p != "/kernel" {
			t.Errorf("second platform requested %s, which the cache has", p)
		}
	}
	var newBytes int64
	for _, c := range res2.Plan.Components {
		if c.Name == "cloud-hypervisor" || c.Name == "virtiofsd" || c.Name == "kernel" {
			newBytes += c.Size
		}
	}
	if res2.Fetched < newBytes {
		t.Errorf("second platform fetched %d, want at least its new components' %d", res2.Fetched, newBytes)
	}
	if strings.Join(res2.Plan.Platforms, " ") != "k3s-cloud-hypervisor-none k3s-qemu-snp" || strings.Join(res2.Plan.Kept, " ") != "k3s-qemu-snp" {
		t.Errorf("platforms %v kept %v: the first platform must be kept", res2.Plan.Platforms, res2.Plan.Kept)
	}
	assertInstalled(t, e.prefix, rel.expect(t, snp, clh))
}

func TestUpgradeRollbackUninstall(t *testing.T) {
	v1 := makeRelease(t, "1.0.0", offline, 1)
	v2 := makeRelease(t, "2.0.0", offline, 1)
	e := newEnv(t)
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	r1 := install(t, e.installer(t, v1.mirror(t)), v1.m, snp)
	r2 := install(t, e.installer(t, v2.mirror(t)), v2.m, snp)
	if r2.Previous != r1.Plan.ID {
		t.Errorf("previous %q, want %q", r2.Previous, r1.Plan.ID)
	}
	assertInstalled(t, e.prefix, v2.expect(t, snp))
	in := e.installer(t)
	from, to, err := in.Rollback(context.Background())
	if err != nil || from != r2.Plan.ID || to != r1.Plan.ID {
		t.Fatalf("rollback %s -> %s: %v", from, to, err)
	}
	assertInstalled(t, e.prefix, v1.expect(t, snp))
	// Rolling back again undoes the rollback.
	if _, to, err := in.Rollback(context.Background()); err != nil || to != r2.Plan.ID {
		t.Fatalf("second rollback to %s: %v", to, err)
	}
	assertInstalled(t, e.prefix, v2.expect(t, snp))
	// A third version: the oldest is collected.
	v3 := makeRelease(t, "3.0.0", offline, 1)
	install(t, e.installer(t, v3.mirror(t)), v3.m, snp)
	ents, _ := os.ReadDir(filepath.Join(e.prefix, versionsDir))
	if len(ents) != 2 {
		t.Errorf("%d installations kept, want current and previous", len(ents))
	}
	// Something that is not berth's stays.
	os.MkdirAll(filepath.Join(e.prefix, "etc/kata"), 0o755)
	os.WriteFile(filepath.Join(e.prefix, "etc/kata/x.toml"), []byte("x"), 0o644)
	if _, err := in.Uninstall(context.Background()); err != nil {
		t.Fatal(err)
	}
	ents, _ = os.ReadDir(e.prefix)
	if len(ents) != 1 || ents[0].Name() != "etc" {
		t.Errorf("after uninstall the prefix holds %v, want only etc/", ents)
	}
	if _, _, err := in.Rollback(context.Background()); err == nil {
		t.Error("rollback after uninstall succeeded")
	}
}

func TestLockRefusesASecondInstaller(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	e := newEnv(t)
	pd, err := Layout{Root: hostRoot(t), Prefix: e.prefix}.open(true)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	lk, err := pd.lock()
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Unlock()
	in := e.installer(t, rel.mirror(t))
	pl, err := in.Plan(rel.m, nil)
	if err == nil {
		t.Fatal("plan without platforms succeeded")
	}
	pl, _ = in.Plan(rel.m, []platform.Platform{mustPlatform(t, "kubeadm-qemu-none")})
	_, err = in.Install(context.Background(), pl)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("error %v, want ErrLocked", err)
	}
}

func TestWrongDigestInMirrorAndNoNetwork(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	mirror := rel.mirror(t)
	data := rel.files["qemu"]
	os.WriteFile(filepath.Join(mirror, "qemu"), append(bytes.Clone(data[:len(data)-1]), 'X'), 0o644)
	e := newEnv(t)
	in := e.installer(t, mirror)
	in.Fetcher.Attempts = 1
	pl, _ := in.Plan(rel.m, []platform.Platform{mustPlatform(t, "kubeadm-qemu-none")})
	_, err := in.Install(context.Background(), pl)
	if err == nil {
		t.Fatal("installed a corrupted file")
	}
	for _, w := range []string{"component qemu", "expected sha256 " + pl.Components[1].SHA256, filepath.Join(mirror, "qemu") + " has sha256 "} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.prefix, currentLink)); err == nil {
		t.Error("current exists after a failed first install")
	}
	assertNoTemp(t, e.prefix)
}

func TestUpgradeKeepsEveryPlatform(t *testing.T) {
	v1 := makeRelease(t, "1.0.0", offline, 1)
	v2 := makeRelease(t, "2.0.0", offline, 1)
	e := newEnv(t)
	snp, clh := mustPlatform(t, "kubeadm-qemu-snp"), mustPlatform(t, "kubeadm-cloud-hypervisor-none")
	install(t, e.installer(t, v1.mirror(t)), v1.m, snp)
	install(t, e.installer(t, v1.mirror(t)), v1.m, clh)
	res := install(t, e.installer(t, v2.mirror(t)), v2.m, snp)
	if strings.Join(res.Plan.Kept, " ") != clh.String() {
		t.Errorf("kept %v, want %s", res.Plan.Kept, clh)
	}
	assertInstalled(t, e.prefix, v2.expect(t, snp, clh))
}

// TestDropAndPrunePrevious: a platform in Installer.Drop is not carried
// into the new installation (its own components go, those the remaining
// platform needs stay), and PrunePrevious then removes the previous
// installation that still served it, the previous link, and any
// top-level link left naming nothing; a second prune removes nothing.
func TestDropAndPrunePrevious(t *testing.T) {
	rel := makeRelease(t, "1.0.0", offline, 1)
	e := newEnv(t)
	snp, clh := mustPlatform(t, "kubeadm-qemu-snp"), mustPlatform(t, "kubeadm-cloud-hypervisor-none")
	install(t, e.installer(t, rel.mirror(t)), rel.m, snp)
	install(t, e.installer(t, rel.mirror(t)), rel.m, clh)
	in := e.installer(t, rel.mirror(t))
	in.Drop = []platform.Platform{snp}
	res := install(t, in, rel.m, clh)
	if len(res.Plan.Kept) != 0 || strings.Join(res.Plan.Platforms, " ") != clh.String() {
		t.Errorf("plan with snp dropped: platforms %v, kept %v", res.Plan.Platforms, res.Plan.Kept)
	}
	assertInstalled(t, e.prefix, rel.expect(t, clh))
	rm, err := in.PrunePrevious(context.Background())
	if err != nil || len(rm.Kept) != 0 || len(rm.Removed) == 0 {
		t.Fatalf("prune: removed %v, kept %v, %v", rm.Removed, rm.Kept, err)
	}
	st, err := in.Layout.Status()
	if err != nil || st.Previous != nil || strings.Join(st.Platforms(), " ") != clh.String() {
		t.Errorf("status after the prune: %+v, %v", st, err)
	}
	vs, err := os.ReadDir(filepath.Join(e.prefix, "versions"))
	if err != nil || len(vs) != 1 || vs[0].Name() != res.Plan.ID {
		t.Errorf("versions after the prune: %v, %v; want only %s", vs, err, res.Plan.ID)
	}
	ents, _ := os.ReadDir(e.prefix)
	for _, d := range ents {
		if _, err := os.Stat(filepath.Join(e.prefix, d.Name())); err != nil {
			t.Errorf("%s names nothing after the prune: %v", d.Name(), err)
		}
	}
	assertInstalled(t, e.prefix, rel.expect(t, clh))
	if rm, err := in.PrunePrevious(context.Background()); err != nil || len(rm.Removed) != 0 {
		t.Errorf("second prune: removed %v, %v", rm.Removed, err)
	}
}
