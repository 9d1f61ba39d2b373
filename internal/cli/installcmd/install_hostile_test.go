package installcmd

import (
	"berth.dev/berth/internal/cli"

	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/treetest"
)

// diffListing names the lines of two listings that differ.
func diffListing(before, after string) string {
	b := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		b[l] = true
	}
	a := map[string]bool{}
	var out []string
	for _, l := range strings.Split(after, "\n") {
		a[l] = true
		if !b[l] {
			out = append(out, "+ "+l)
		}
	}
	for _, l := range strings.Split(before, "\n") {
		if !a[l] {
			out = append(out, "- "+l)
		}
	}
	return strings.Join(out, "\n")
}

// canaryDir makes a directory outside every root, with files in it, whose
// listing must never change.
func canaryDir(t *testing.T) string {
	t.Helper()
	c := t.TempDir()
	for _, d := range []string{"opt/berth/versions", "state", "cache", "record", "elsewhere"} {
		os.MkdirAll(filepath.Join(c, d), 0o755)
		os.WriteFile(filepath.Join(c, d, "canary"), []byte("do not touch "+d), 0o644)
	}
	return c
}

// relTo is the relative symlink target from the directory of link to
// target: a link that climbs out of the root with "..".
func relTo(t *testing.T, link, target string) string {
	t.Helper()
	r, err := filepath.Rel(filepath.Dir(link), target)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	os.RemoveAll(link)
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestHostileRootsWriters runs install, uninstall and rollback on roots
// whose paths lead outside through symlinks or "..": nothing outside the
// root ever changes (a canary directory's listing), and a refused install
// changes nothing inside the root either.
func TestHostileRootsWriters(t *testing.T) {
	relA := makeCLIRelease(t, "http://127.0.0.1:9/a")
	relB := makeCLIRelease(t, "http://127.0.0.1:9/b")
	mpA, mirror := relA.write(t)
	mpB, _ := relB.write(t)
	const plat = "k3s-qemu-snp"
	install := func(root string, extra ...string) (int, string, string) {
		args := append([]string{"--root", root, "install", "-p", plat, "-m", mpB, "--from", mirror}, extra...)
		return runCheckCLI(t, args...)
	}
	// preinstall installs A then B: B is current, A previous.
	preinstall := func(t *testing.T, root string) (idA, idB string) {
		for _, mp := range []string{mpA, mpB} {
			if code, out, errOut := runCheckCLI(t, "--root", root, "install", "-p", plat, "-m", mp, "--from", mirror); code != 0 {
				t.Fatalf("preinstall: exit %d\n%s\n%s", code, out, errOut)
			}
		}
		cur, _ := os.Readlink(filepath.Join(root, "opt/berth/current"))
		prev, _ := os.Readlink(filepath.Join(root, "opt/berth/previous"))
		return strings.TrimPrefix(prev, "versions/"), strings.TrimPrefix(cur, "versions/")
	}

	for _, tc := range []struct {
		name string
		// pre installs normally before the attack is planted.
		pre   bool
		plant func(t *testing.T, root, canary, idA, idB string)
		// args are extra install arguments.
		args []string
		// install's exit status and a word of its error; uninstall's and
		// rollback's exit status.
		install   int
		want      string
		uninstall int
		rollback  int
	}{{
		name: "opt linked outside (absolute)",
		plant: func(t *testing.T, root, canary, _, _ string) {
			symlink(t, filepath.Join(canary, "opt"), filepath.Join(root, "opt"))
		},
		// Resolved in the root as a chroot would, the link leads nowhere.
		install: 1, want: "--prefix /opt/berth", uninstall: 1, rollback: 1,
	}, {
		name: "opt linked outside (relative, climbing)",
		plant: func(t *testing.T, root, canary, _, _ string) {
			symlink(t, relTo(t, filepath.Join(root, "opt"), filepath.Join(canary, "opt")), filepath.Join(root, "opt"))
		},
		install: 1, want: "resolves outside the host root", uninstall: 1, rollback: 1,
	}, {
		name: "installed, then opt linked outside",
		pre:  true,
		plant: func(t *testing.T, root, canary, _, _ string) {
			os.RemoveAll(filepath.Join(canary, "opt"))
			if err := os.Rename(filepath.Join(root, "opt"), filepath.Join(canary, "opt")); err != nil {
				t.Fatal(err)
			}
			symlink(t, relTo(t, filepath.Join(root, "opt"), filepath.Join(canary, "opt")), filepath.Join(root, "opt"))
		},
		install: 1, want: "resolves outside the host root", uninstall: 1, rollback: 1,
	}, {
		name: "dot-dot chain in the prefix",
		args: []string{"--prefix", "/opt/../../../../../../../../tmp/berth-escape"},
		plant: func(t *testing.T, root, canary, _, _ string) {
			// The same chain, anchored in the canary.
		},
		install: 1, want: `".." component`, uninstall: 1, rollback: 1,
	}, {
		name: "var/lib/berth linked outside (absolute)",
		plant: func(t *testing.T, root, canary, _, _ string) {
			symlink(t, filepath.Join(canary, "state"), filepath.Join(root, "var/lib/berth"))
		},
		install: 1, want: "/var/lib/berth", uninstall: 0, rollback: 1,
	}, {
		name: "var/lib/berth linked outside (relative)",
		plant: func(t *testing.T, root, canary, _, _ string) {
			symlink(t, relTo(t, filepath.Join(root, "var/lib/berth"), filepath.Join(canary, "state")), filepath.Join(root, "var/lib/berth"))
		},
		install: 1, want: "/var/lib/berth", uninstall: 0, rollback: 1,
	}, {
		name: "var/cache/berth linked outside",
		plant: func(t *testing.T, root, canary, _, _ string) {
			symlink(t, relTo(t, filepath.Join(root, "var/cache/berth"), filepath.Join(canary, "cache")), filepath.Join(root, "var/cache/berth"))
		},
		install: 1, want: "cache /var/cache/berth", uninstall: 1, rollback: 1,
	}, {
		name: "versions linked outside after install",
		pre:  true,
		plant: func(t *testing.T, root, canary, _, _ string) {
			v := filepath.Join(root, "opt/berth/versions")
			os.RemoveAll(filepath.Join(canary, "opt/berth/versions"))
			if err := os.Rename(v, filepath.Join(canary, "opt/berth/versions")); err != nil {
				t.Fatal(err)
			}
			symlink(t, filepath.Join(canary, "opt/berth/versions"), v)
		},
		install: 1, want: "versions", uninstall: 1, rollback: 1,
	}, {
		name: "the install record's directory linked outside",
		pre:  true,
		plant: func(t *testing.T, root, canary, idA, idB string) {
			for _, id := range []string{idA, idB} {
				rec := filepath.Join(root, "opt/berth/versions", id, ".berth")
				dst := filepath.Join(canary, "record", id)
				if err := os.Rename(rec, dst); err != nil {
					t.Fatal(err)
				}
				symlink(t, dst, rec)
			}
		},
		install: 1, want: ".berth", uninstall: 1, rollback: 1,
	}, {
		name: "a top-level link replaced by a directory",
		pre:  true,
		plant: func(t *testing.T, root, canary, _, _ string) {
			bin := filepath.Join(root, "opt/berth/bin")
			os.Remove(bin)
			os.MkdirAll(bin, 0o755)
			os.WriteFile(filepath.Join(bin, "mine"), []byte("x"), 0o755)
		},
		install: 1, want: "not berth's link", uninstall: 0, rollback: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyInstallRoot(t)
			canary := canaryDir(t)
			var idA, idB string
			if tc.pre {
				idA, idB = preinstall(t, root)
			}
			tc.plant(t, root, canary, idA, idB)
			wantCanary := treetest.Listing(t, canary)
			checkCanary := func(after string) {
				t.Helper()
				if got := treetest.Listing(t, canary); got != wantCanary {
					t.Fatalf("after %s, the directory outside the root changed:\n%s", after, diffListing(wantCanary, got))
				}
				if _, err := os.Lstat("/tmp/berth-escape"); err == nil {
					os.RemoveAll("/tmp/berth-escape")
					t.Fatalf("after %s, /tmp/berth-escape exists", after)
				}
			}

			before := treetest.Listing(t, root)
			code, out, errOut := install(root, tc.args...)
			checkCanary("install")
			if code != tc.install || !strings.Contains(errOut, tc.want) {
				t.Errorf("install: exit %d (want %d), stderr lacks %q:\n%s\n%s", code, tc.install, tc.want, out, errOut)
			}
			if code == 1 {
				if !strings.Contains(errOut, "nothing was changed") {
					t.Errorf("install refusal does not say nothing was changed: %s", errOut)
				}
				if after := treetest.Listing(t, root); after != before {
					t.Errorf("the refused install changed the root:\n%s", diffListing(before, after))
				}
			}

			code, out, errOut = runCheckCLI(t, append([]string{"--root", root, "rollback"}, tc.args...)...)
			checkCanary("rollback")
			if code != tc.rollback {
				t.Errorf("rollback: exit %d, want %d\n%s\n%s", code, tc.rollback, out, errOut)
			}

			code, out, errOut = runCheckCLI(t, append([]string{"--root", root, "uninstall", "--purge-cache"}, tc.args...)...)
			checkCanary("uninstall")
			if code != tc.uninstall {
				t.Errorf("uninstall: exit %d, want %d\n%s\n%s", code, tc.uninstall, out, errOut)
			}
			t.Logf("uninstall: exit %d\n%s%s", code, out, errOut)
		})
	}
}

// TestAbsoluteSymlinkInsideRoot: /opt -> /elsewhere inside the root is
// resolved in the root, as the host's kernel resolves it: the install
// lands in <root>/elsewhere/berth, never in this machine's /elsewhere.
// The runtime configuration (written through its own confined writer)
// either follows too or is refused before anything is installed: never a
// half install.
func TestAbsoluteSymlinkInsideRoot(t *testing.T) {
	rel := makeCLIRelease(t, "http://127.0.0.1:9/x")
	mp, mirror := rel.write(t)
	for _, noConfig := range []bool{true, false} {
		t.Run(fmt.Sprintf("no-config=%v", noConfig), func(t *testing.T) {
			root := copyInstallRoot(t)
			canary := canaryDir(t)
			os.MkdirAll(filepath.Join(root, "elsewhere"), 0o755)
			symlink(t, "/elsewhere", filepath.Join(root, "opt"))
			wantCanary := treetest.Listing(t, canary)
			before := treetest.Listing(t, root)
			args := []string{"--root", root, "install", "-p", "k3s-qemu-snp", "-m", mp, "--from", mirror}
			if noConfig {
				args = append(args, "--no-config")
			}
			code, out, errOut := runCheckCLI(t, args...)
			switch {
			case code == 0:
				got, err := os.ReadFile(filepath.Join(root, "elsewhere/berth/bin/qemu-system-x86_64"))
				if err != nil || string(got) != string(rel.files["qemu"]) {
					t.Errorf("not installed under <root>/elsewhere/berth: %v", err)
				}
				if !noConfig {
					if _, err := os.Stat(filepath.Join(root, "elsewhere/berth/etc/kata/k3s-qemu-snp.toml")); err != nil {
						t.Errorf("configuration: %v", err)
					}
				}
			case code == 1 && !noConfig:
				if after := treetest.Listing(t, root); after != before {
					t.Errorf("refused, but the root changed:\n%s", diffListing(before, after))
				}
				t.Logf("refused before installing (the configuration writer does not follow absolute links): %s", errOut)
			default:
				t.Fatalf("install: exit %d\n%s\n%s", code, out, errOut)
			}
			if _, err := os.Lstat("/elsewhere"); err == nil {
				t.Error("/elsewhere exists on this machine")
			}
			code, out, errOut = runCheckCLI(t, "--root", root, "uninstall")
			if code != 0 {
				t.Errorf("uninstall: exit %d\n%s\n%s", code, out, errOut)
			}
			if _, err := os.Lstat(filepath.Join(root, "elsewhere/berth/versions")); err == nil {
				t.Error("uninstall left the installation")
			}
			if got := treetest.Listing(t, canary); got != wantCanary {
				t.Errorf("outside changed:\n%s", diffListing(wantCanary, got))
			}
		})
	}
}

// TestUninstallCLILeavesChangedEntry: a file berth installed and an admin
// replaced stays, with a warning naming it, and the rest goes.
func TestUninstallCLILeavesChangedEntry(t *testing.T) {
	rel := makeCLIRelease(t, "http://127.0.0.1:9/x")
	mp, mirror := rel.write(t)
	root := copyInstallRoot(t)
	if code, out, errOut := runCheckCLI(t, "--root", root, "install", "-p", "k3s-qemu-snp", "-m", mp, "--from", mirror, "--no-config"); code != 0 {
		t.Fatalf("install: exit %d\n%s\n%s", code, out, errOut)
	}
	cur, _ := os.Readlink(filepath.Join(root, "opt/berth/current"))
	v := filepath.Join(root, "opt/berth", cur)
	qemu := filepath.Join(v, "bin/qemu-system-x86_64")
	os.Remove(qemu)
	os.WriteFile(qemu, []byte("the admin's own build"), 0o755)
	shim := filepath.Join(v, "bin/containerd-shim-kata-v2")
	os.Remove(shim)
	os.Symlink("/usr/bin/true", shim)
	code, out, errOut := runCheckCLI(t, "--root", root, "uninstall")
	if code != 0 {
		t.Fatalf("uninstall: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, w := range []string{"warning: left " + qemu + " in place: it changed", "warning: left " + shim + " in place: it is a symlink now"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut)
		}
	}
	if got, _ := os.ReadFile(qemu); string(got) != "the admin's own build" {
		t.Error("the changed file was removed")
	}
	if t2, _ := os.Readlink(shim); t2 != "/usr/bin/true" {
		t.Error("the symlink was removed")
	}
	if _, err := os.Stat(filepath.Join(v, "share/ovmf/AMDSEV.fd")); err == nil {
		t.Error("an unchanged file is still there")
	}
}

// TestBundleWithoutCacheWritesNoCache: bundle without --cache writes only
// the bundle: nothing under /var/cache/berth (of this machine or of
// --root), and no temporary directory left beside the bundle.
func TestBundleWithoutCacheWritesNoCache(t *testing.T) {
	srv, rel := serveCLIRelease(t)
	mp, _ := rel.write(t)
	root := t.TempDir()
	before := treetest.Listing(t, "/var/cache/berth")
	outDir := t.TempDir()
	out := filepath.Join(outDir, "b.tar")
	code, stdout, errOut := runCheckCLI(t, "--root", root, "bundle", "-p", "k3s-qemu-snp", "-m", mp, "-o", out)
	if code != 0 {
		t.Fatalf("bundle: exit %d\n%s\n%s", code, stdout, errOut)
	}
	if after := treetest.Listing(t, "/var/cache/berth"); after != before {
		t.Errorf("bundle without --cache changed /var/cache/berth:\n%s", diffListing(before, after))
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("bundle wrote into --root: %v", ents)
	}
	ents, _ := os.ReadDir(outDir)
	if len(ents) != 1 || ents[0].Name() != "b.tar" {
		t.Errorf("beside the bundle: %v, want only b.tar", ents)
	}
	if srv.requests() == 0 {
		t.Error("nothing was downloaded")
	}
}

// TestBundleAndInstallSizeCap: a component declaring more than
// --max-component-size is refused before anything is fetched or created,
// naming the component, its size and the limit.
func TestBundleAndInstallSizeCap(t *testing.T) {
	srv, rel := serveCLIRelease(t)
	mp, _ := rel.write(t)
	outDir := t.TempDir()
	out := filepath.Join(outDir, "b.tar")
	cache := filepath.Join(t.TempDir(), "cache")
	code, _, errOut := runCheckCLI(t, "bundle", "-p", "k3s-qemu-snp", "-m", mp, "-o", out, "--cache", cache, "--max-component-size", "100KiB")
	for _, w := range []string{"component containerd-shim-kata-v2 declares 195.3 KiB (200000 bytes)", "limit of 100.0 KiB"} {
		if code != cli.ExitNotReady || !strings.Contains(errOut, w) {
			t.Errorf("bundle: exit %d, stderr lacks %q: %s", code, w, errOut)
		}
	}
	if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
		t.Errorf("the refused bundle left %v", ents)
	}
	if _, err := os.Stat(cache); err == nil {
		t.Error("the refused bundle created the cache")
	}
	root := copyInstallRoot(t)
	before := treetest.Listing(t, root)
	code, _, errOut = runCheckCLI(t, "--root", root, "install", "-p", "k3s-qemu-snp", "-m", mp, "--max-component-size", "150000")
	if code != cli.ExitNotReady || !strings.Contains(errOut, "component containerd-shim-kata-v2 declares") || !strings.Contains(errOut, "146.5 KiB") {
		t.Errorf("install: exit %d: %s", code, errOut)
	}
	if after := treetest.Listing(t, root); after != before {
		t.Errorf("the refused install changed the root:\n%s", diffListing(before, after))
	}
	if n := srv.requests(); n != 0 {
		t.Errorf("%d requests: the limit must be checked before any download", n)
	}
	code, _, errOut = runCheckCLI(t, "bundle", "-p", "k3s-qemu-snp", "-m", mp, "-o", out, "--max-component-size", "lots")
	if code != cli.ExitUsage || !strings.Contains(errOut, "--max-component-size") {
		t.Errorf("bad --max-component-size: exit %d %s", code, errOut)
	}
}

// TestBundleFreeSpace: a bundle that the output's file system (a 256 KiB
// tmpfs) cannot hold is refused before anything is fetched, naming the
// components, their sizes and the free space; nothing is left there.
func TestBundleFreeSpace(t *testing.T) {
	srv, rel := serveCLIRelease(t)
	mp, _ := rel.write(t)
	mnt := t.TempDir()
	testkit.NeedsRoot(t, "mounting a tmpfs")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "berth-test", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs (this test needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	out := filepath.Join(mnt, "b.tar")
	code, _, errOut := runCheckCLI(t, "bundle", "-p", "k3s-qemu-snp", "-m", mp, "-o", out)
	for _, w := range []string{"not enough free space on the file system of " + mnt, "containerd-shim-kata-v2 195.3 KiB (200000 bytes)", "qemu 146.5 KiB", "free", "nothing was fetched"} {
		if code != cli.ExitNotReady || !strings.Contains(errOut, w) {
			t.Errorf("exit %d, stderr lacks %q: %s", code, w, errOut)
		}
	}
	if ents, _ := os.ReadDir(mnt); len(ents) != 0 {
		t.Errorf("left %v on the file system", ents)
	}
	if n := srv.requests(); n != 0 {
		t.Errorf("%d requests before the refusal", n)
	}
}

// countingServer serves a release and counts the requests.
type countingServer struct {
	*httptest.Server
	n atomic.Int64
}

func (s *countingServer) requests() int64 { return s.n.Load() }

// serveCLIRelease serves a CLI test release from a loopback server.
func serveCLIRelease(t *testing.T) (*countingServer, cliRelease) {
	t.Helper()
	s := &countingServer{}
	var rel cliRelease
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.n.Add(1)
		data, ok := rel.files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(s.Close)
	rel = makeCLIRelease(t, s.URL)
	return s, rel
}
