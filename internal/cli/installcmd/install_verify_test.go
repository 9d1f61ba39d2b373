//go:build linux

package installcmd

import (
	"berth.dev/berth/internal/node/configure"

	"berth.dev/berth/internal/cli"

	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/critest"
)

// buildBinaries builds berth and berth-cluster into one directory, as make
// build does: berth finds berth-cluster beside it.
func buildBinaries(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal("the go tool is not on PATH: this test builds berth and berth-cluster")
	}
	dir := t.TempDir()
	cmd := exec.Command(gobin, "build", "-o", dir+"/", "./cmd/berth", "./cmd/berth-cluster")
	cmd.Dir = filepath.Join("..", "..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/berth ./cmd/berth-cluster: %v\n%s", err, out)
	}
	return dir
}

// runBinary runs a built binary as its own process, with its own stdout
// and stderr (pipes, not a test's buffers): the conditions under which
// berth used to replace itself with berth-cluster to verify.
func runBinary(t *testing.T, bin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "BERTH_CLUSTER=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errOut.String()
	case err != nil:
		t.Fatalf("running %s: %v", bin, err)
	}
	return 0, out.String(), errOut.String()
}

// TestInstallVerifiesEveryPlatform installs two platforms with the real
// berth and berth-cluster binaries on a root where a real containerd 2.x
// serves the kubeadm socket, and checks that each platform is verified and
// reported: not live before containerd reloads its configuration (exit 1,
// both named), live after (exit 0), and a platform that is not live ahead
// of one that is does not stop the second's verification. Both are nydus
// platforms: the release delivers the real containerd-nydus-grpc
// (.ci/tools.sh's) from the --from mirror into the prefix, and berth
// verifies each handler's snapshotter too, so that the handlers are live
// only once the snapshotter berth's unit runs answers containerd (the
// test starts it as the unit says, there being no systemd here).
func TestInstallVerifiesEveryPlatform(t *testing.T) {
	ctrd := critest.ContainerdBin(t, "BERTH_CONTAINERD2")
	nydusBin := os.Getenv("BERTH_NYDUS_SNAPSHOTTER")
	if nydusBin == "" {
		t.Fatal("BERTH_NYDUS_SNAPSHOTTER is not set: run `make tools` (.ci/tools.sh) and source .ci/tools.env")
	}
	nydus, err := os.ReadFile(nydusBin)
	if err != nil {
		t.Fatal(err)
	}
	bins := buildBinaries(t)
	berth, cluster := filepath.Join(bins, "berth"), filepath.Join(bins, "berth-cluster")

	// A short root: containerd's socket lives under it, where verify looks
	// for the kubeadm layout's, and unix socket paths are short.
	root, err := os.MkdirTemp("", "bi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	d := critest.Dirs{Dir: filepath.Join(root, "c"), Sock: filepath.Join(root, "run/containerd/containerd.sock")}
	main := filepath.Join(root, "etc/containerd/config.toml")
	for _, dir := range []string{d.Dir, filepath.Dir(d.Sock), filepath.Dir(main)} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(main, []byte(critest.BaseConfig(d, 3, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	rel := makeCLIReleaseWithNydus(t, "http://127.0.0.1:9/unplugged", nydus)
	mp, mirror := rel.write(t)
	berthInstall := func(bin string, extra []string, ps ...string) (int, string, string) {
		t.Helper()
		args := []string{"--root", root, "--live", "install", "-m", mp, "--from", mirror, "--cache", filepath.Join(root, "cache"),
			"--force", "--containerd-config-version", "3"}
		for _, p := range ps {
			args = append(args, "-p", p)
		}
		return runBinary(t, bin, append(args, extra...)...)
	}
	const snp, tdx, clh = "kubeadm-qemu-snp", "kubeadm-qemu-tdx", "kubeadm-cloud-hypervisor-none"
	// The handlers are kata-deploy's names of the platforms.
	handler := map[string]string{snp: "kata-qemu-snp", tdx: "kata-qemu-tdx", clh: "kata-clh"}

	// containerd runs on the node's config: neither handler is there yet.
	// It runs in a namespace of its own (StartOnRoot), whose /run has the
	// root's run/berth-nydus, where the snapshotter serves.
	start := func() func() {
		dm, err := critest.StartOnRoot(t, ctrd, root, d)
		if err != nil {
			t.Fatal(err)
		}
		return dm.Stop
	}
	stop := start()
	for _, bin := range []string{berth, cluster} {
		code, out, errOut := berthInstall(bin, nil, snp, tdx)
		if code != cli.ExitNotReady {
			t.Fatalf("%s install before the runtime reloads: exit %d, want %d\n%s\n%s", filepath.Base(bin), code, cli.ExitNotReady, out, errOut)
		}
		for _, p := range []string{snp, tdx} {
			if !strings.Contains(out, "handler "+handler[p]+": NOT live in containerd") {
				t.Errorf("%s: %s not reported NOT live:\n%s\n%s", filepath.Base(bin), p, out, errOut)
			}
		}
		if !strings.Contains(errOut, "does not serve 2 of 2 platforms: "+snp+", "+tdx) || strings.Contains(errOut, "Usage:") {
			t.Errorf("%s: the error does not name both platforms (alone):\n%s", filepath.Base(bin), errOut)
		}
	}

	// The install delivered the snapshotter the unit runs.
	if got, err := os.ReadFile(filepath.Join(root, configure.DefaultPrefix, configure.NydusBinary)); err != nil || !bytes.Equal(got, nydus) {
		t.Fatalf("%s: not the release's containerd-nydus-grpc (%v)", configure.NydusBinary, err)
	}
	// Restarted without the snapshotter running: the handlers are
	// there, but not live, since their snapshotter does not answer.
	stop()
	stop = start()
	code, out, errOut := berthInstall(cluster, nil, snp)
	if code != cli.ExitNotReady || !strings.Contains(out, configure.NydusProxy) {
		t.Errorf("install with the snapshotter stopped: exit %d, want %d naming %s\n%s\n%s", code, cli.ExitNotReady, configure.NydusProxy, out, errOut)
	}
	t.Logf("snapshotter not running:\n%s", out)

	// After a restart containerd has both, and the snapshotter runs as
	// berth's unit says: berth verifies both (each in a child
	// berth-cluster), berth-cluster both in-process.
	var nydusSvc critest.Service
	t.Cleanup(nydusSvc.Stop)
	if err := nydusSvc.Start(root, filepath.Join(root, configure.SystemdUnitDir, configure.NydusUnit),
		"--root", filepath.Join(root, "var/lib", configure.NydusProxy)); err != nil {
		t.Fatalf("starting the snapshotter: %v\n%s", err, nydusSvc.Log())
	}
	stop()
	stop = start()
	for _, bin := range []string{berth, cluster} {
		code, out, errOut := berthInstall(bin, nil, snp, tdx)
		if code != 0 {
			t.Fatalf("%s install: exit %d\n%s\n%s", filepath.Base(bin), code, out, errOut)
		}
		for _, p := range []string{snp, tdx} {
			if !strings.Contains(out, "handler "+handler[p]+": live in containerd") {
				t.Errorf("%s: %s not verified live:\n%s\n%s", filepath.Base(bin), p, out, errOut)
			}
		}
	}

	// JSON lines: one verification per platform.
	code, out, errOut = berthInstall(berth, []string{"-o", "json"}, snp, tdx)
	var live []string
	for line := range strings.Lines(out) {
		var v struct {
			Verify *configure.Verification `json:"verify"`
		}
		if json.Unmarshal([]byte(line), &v) == nil && v.Verify != nil && v.Verify.Live {
			live = append(live, v.Verify.Platform)
		}
	}
	if code != 0 || strings.Join(live, " ") != snp+" "+tdx {
		t.Errorf("-o json: exit %d, live %v\n%s\n%s", code, live, out, errOut)
	}

	// A third platform the running containerd has not loaded, asked for
	// first: it is NOT live, and the one after it is still verified.
	code, out, errOut = berthInstall(berth, nil, clh, snp)
	if code != cli.ExitNotReady || !strings.Contains(out, "handler "+handler[clh]+": NOT live") || !strings.Contains(out, "handler "+handler[snp]+": live in containerd") {
		t.Errorf("install %s %s: exit %d\n%s\n%s", clh, snp, code, out, errOut)
	}

	// No runtime at all: each platform is unknown, with the reason.
	stop()
	for _, bin := range []string{berth, cluster} {
		code, out, errOut = berthInstall(bin, nil, snp, tdx)
		if code != cli.ExitNotReady || strings.Count(out, "could not be asked: ") != 2 {
			t.Errorf("%s install with containerd stopped: exit %d\n%s\n%s", filepath.Base(bin), code, out, errOut)
		}
	}
}
