package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/treetest"
	"berth.dev/berth/platform"
)

// pauseEnv asks the helper to pause mid-switch: when set to a path, the
// helper's installer creates that file just before it renames the new
// current link into place, then waits a minute, so that a test can kill it
// there. It is the helper's own: the shipped binaries have no such hook.
const pauseEnv = "BERTH_TEST_PAUSE_BEFORE_SWITCH"

// pauseHook is the BeforeSwitch hook pauseEnv asks for, nil if unset.
func pauseHook() func() {
	p := os.Getenv(pauseEnv)
	if p == "" {
		return nil
	}
	return func() {
		os.WriteFile(p, []byte(fmt.Sprint(os.Getpid())), 0o644)
		time.Sleep(time.Minute)
	}
}

// helperEnv carries the helper process's job; TestMain runs it instead of
// the tests when it is set.
const helperEnv = "BERTH_INSTALL_HELPER"

type helperJob struct {
	Prefix, Cache, Manifest, Platform string
	From                              []string
}

func TestMain(m *testing.M) {
	if job := os.Getenv(helperEnv); job != "" {
		if err := runHelper(job); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runHelper(job string) error {
	var j helperJob
	if err := json.Unmarshal([]byte(job), &j); err != nil {
		return err
	}
	m, err := manifest.Load(j.Manifest)
	if err != nil {
		return err
	}
	p, err := platform.Parse(j.Platform)
	if err != nil {
		return err
	}
	ls, _, err := Locators(j.From)
	if err != nil {
		return err
	}
	f := fetch.New(ls, j.Cache)
	f.Backoff, f.MaxBackoff = time.Millisecond, time.Millisecond
	host, err := hostfs.OpenWritable("/")
	if err != nil {
		return err
	}
	defer host.Close()
	in := &Installer{Layout: Layout{Root: host, Prefix: j.Prefix}, Fetcher: f, Parallel: 2, BeforeSwitch: pauseHook()}
	pl, err := in.Plan(m, []platform.Platform{p})
	if err != nil {
		return err
	}
	_, err = in.Install(context.Background(), pl)
	return err
}

// startHelper starts the test binary as an installer process.
func startHelper(t *testing.T, j helperJob, extraEnv ...string) *exec.Cmd {
	t.Helper()
	data, _ := json.Marshal(j)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(data))
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func kill9(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("helper was not killed by SIGKILL: %v", err)
	}
}

// crashSetup installs v1 from a mirror and serves v2 from a loopback
// server; it returns the env, both releases, the server and v2's manifest
// path.
func crashSetup(t *testing.T) (env, *release, *release, *releaseServer, string) {
	e := newEnv(t)
	v1 := makeRelease(t, "1.0.0", offline, 1)
	install(t, e.installer(t, v1.mirror(t)), v1.m, mustPlatform(t, "kubeadm-qemu-snp"))
	s := newReleaseServer(t)
	v2 := makeRelease(t, "2.0.0", s.URL, 20)
	s.set(func() *release { return v2 }, nil)
	mp := filepath.Join(t.TempDir(), "manifest.yaml")
	os.WriteFile(mp, []byte(v2.yaml), 0o644)
	return e, v1, v2, s, mp
}

func TestKillDuringDownload(t *testing.T) {
	e, v1, v2, s, mp := crashSetup(t)
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	stall := make(chan struct{})
	defer close(stall)
	// The shim (6 MB at this scale) stalls after its first megabyte.
	s.set(nil, func(n int, w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/containerd-shim-kata-v2" || r.Header.Get("Range") != "" {
			return false
		}
		data := v2.files["containerd-shim-kata-v2"]
		w.Header().Set("Content-Length", fmt.Sprint(len(data)))
		w.Write(data[:1<<20])
		w.(http.Flusher).Flush()
		select {
		case <-stall:
		case <-r.Context().Done():
		}
		return true
	})
	cmd := startHelper(t, helperJob{Prefix: e.prefix, Cache: e.cache, Manifest: mp, Platform: snp.String()})
	shim := v2.m.Components[0]
	partial := filepath.Join(e.cache, "sha256", shim.SHA256+".partial")
	waitFor(t, "the download to be under way", func() bool {
		fi, err := os.Stat(partial)
		return err == nil && fi.Size() >= 1<<20
	})
	kill9(t, cmd)

	// The previous installation still works.
	assertInstalled(t, e.prefix, v1.expect(t, snp))

	// A re-run converges, resuming the broken download.
	s.set(nil, nil)
	res := install(t, e.installer(t), v2.m, snp)
	assertInstalled(t, e.prefix, v2.expect(t, snp))
	assertNoTemp(t, e.prefix, e.cache)
	_, _, ranges := s.stats()
	if !contains(ranges, fmt.Sprintf("/containerd-shim-kata-v2 bytes=%d-", 1<<20)) {
		t.Errorf("the re-run did not resume the shim from 1 MiB: ranges %v", ranges)
	}
	if want := res.Plan.Bytes - 1<<20; res.Fetched > want {
		t.Errorf("re-run fetched %d bytes, want at most %d (the rest)", res.Fetched, want)
	}
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func TestKillDuringSwitch(t *testing.T) {
	e, v1, v2, _, mp := crashSetup(t)
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	marker := filepath.Join(t.TempDir(), "paused")
	cmd := startHelper(t, helperJob{Prefix: e.prefix, Cache: e.cache, Manifest: mp, Platform: snp.String()}, pauseEnv+"="+marker)
	waitFor(t, "the installer to pause before the switch", func() bool { _, err := os.Stat(marker); return err == nil })
	ents, _ := os.ReadDir(e.prefix)
	var tmp []string
	for _, en := range ents {
		if strings.Contains(en.Name(), ".tmp-") {
			tmp = append(tmp, en.Name())
		}
	}
	if len(tmp) != 1 {
		t.Fatalf("paused, but the temporary link is not there: %v", ents)
	}
	kill9(t, cmd)
	assertInstalled(t, e.prefix, v1.expect(t, snp))

	res := install(t, e.installer(t), v2.m, snp)
	if res.Fetched != 0 {
		t.Errorf("re-run fetched %d bytes: the staged installation should have been reused", res.Fetched)
	}
	assertInstalled(t, e.prefix, v2.expect(t, snp))
	assertNoTemp(t, e.prefix, e.cache)
}

// tmpfs mounts a tmpfs of size (as mount -o size= takes it) on a new
// directory and unmounts it at the end of the test (which needs root).
func tmpfs(t *testing.T, size string) string {
	t.Helper()
	mnt := t.TempDir()
	testkit.NeedsRoot(t, "mounting a tmpfs")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "berth-test", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mounting a %s tmpfs at %s (this test needs root): %v: %s", size, mnt, err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	return mnt
}

// TestWriteErrorLeavesPreviousIntact installs into a 1 MiB tmpfs a release
// whose declared size fits (the free-space check passes) but whose archive
// extracts to more than the disk holds: the write fails mid-stage.
func TestWriteErrorLeavesPreviousIntact(t *testing.T) {
	mnt := tmpfs(t, "1m")
	e := env{prefix: filepath.Join(mnt, "berth"), cache: filepath.Join(t.TempDir(), "cache")}
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	v1 := makeRelease(t, "1.0.0", offline, 1)
	install(t, e.installer(t, v1.mirror(t)), v1.m, snp)
	// 2 MiB of zeros, a few KiB compressed.
	// (with the shim, hypervisor and nydus-snapshotter the platform's
	// configuration points at, without which the release would not be
	// installable at all).
	gz := tarball(t, "tar.gz", []member{{"shim", "bin/containerd-shim-kata-v2", "0755", []byte("shim")},
		{"qemu", "bin/qemu-system-x86_64", "0755", []byte("qemu")}, {"nydus", "bin/containerd-nydus-grpc", "0755", []byte("nydus")},
		{"zeros", "share/zeros", "0644", make([]byte, 2<<20)}})
	sum := sha256.Sum256(gz)
	y := fmt.Sprintf("apiVersion: berth.dev/manifest/v1\nname: kata-test\nversion: \"2.0.0\"\ncomponents:\n"+
		"  - name: zeros\n    version: \"2\"\n    role: data\n    sources: [%s/zeros.tar.gz]\n    sha256: %s\n    size: %d\n"+
		"    archive:\n      type: tar.gz\n      members:\n        - {name: shim, path: bin/containerd-shim-kata-v2, mode: \"0755\"}\n"+
		"        - {name: qemu, path: bin/qemu-system-x86_64, mode: \"0755\"}\n        - {name: nydus, path: bin/containerd-nydus-grpc, mode: \"0755\"}\n"+
		"        - {name: zeros, path: share/zeros, mode: \"0644\"}\n",
		offline, hex.EncodeToString(sum[:]), len(gz))
	v2, err := manifest.Parse([]byte(y), "zeros.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mirror := t.TempDir()
	os.WriteFile(filepath.Join(mirror, "zeros.tar.gz"), gz, 0o644)
	in := e.installer(t, mirror)
	pl, err := in.Plan(v2, []platform.Platform{snp})
	if err != nil {
		t.Fatal(err)
	}
	_, err = in.Install(context.Background(), pl)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), "component ") {
		t.Fatalf("error %v: want a clear no-space error naming the component", err)
	}
	assertInstalled(t, e.prefix, v1.expect(t, snp))
	assertNoTemp(t, e.prefix)
}

// TestFreeSpaceRefusedBeforeDownload: a release whose declared sizes do not
// fit the prefix's file system (a 1 MiB tmpfs) is refused before anything
// is fetched or changed, naming the components, their sizes and the free
// space.
func TestFreeSpaceRefusedBeforeDownload(t *testing.T) {
	mnt := tmpfs(t, "1m")
	e := env{prefix: filepath.Join(mnt, "berth"), cache: filepath.Join(t.TempDir(), "cache")}
	snp := mustPlatform(t, "kubeadm-qemu-snp")
	v1 := makeRelease(t, "1.0.0", offline, 1)
	install(t, e.installer(t, v1.mirror(t)), v1.m, snp)
	before := treetest.Listing(t, mnt)
	s := newReleaseServer(t)
	v2 := makeRelease(t, "2.0.0", s.URL, 4)
	s.set(func() *release { return v2 }, nil)
	in := e.installer(t)
	pl, err := in.Plan(v2.m, []platform.Platform{snp})
	if err != nil {
		t.Fatal(err)
	}
	_, err = in.Install(context.Background(), pl)
	var se *fetch.SpaceError
	if !errors.As(err, &se) {
		t.Fatalf("error %v, want a *fetch.SpaceError", err)
	}
	for _, w := range []string{"not enough free space", mnt, "containerd-shim-kata-v2 1.1 MiB (1200000 bytes)", "free"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if n, _, _ := s.stats(); n != 0 {
		t.Errorf("%d requests to the server: the check must come before any download", n)
	}
	if _, err := os.Stat(e.cache); err == nil {
		t.Error("the cache was created")
	}
	if after := treetest.Listing(t, mnt); after != before {
		t.Errorf("the prefix changed:\nbefore %s\nafter  %s", before, after)
	}
	assertInstalled(t, e.prefix, v1.expect(t, snp))
}
