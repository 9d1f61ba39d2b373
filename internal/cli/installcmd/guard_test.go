//go:build linux

package installcmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/testnode"
)

// TestRemovalGuardCLI is issue #41's guard on a node, with the real berth
// and berth-cluster binaries and a real containerd 2.x serving the k3s
// socket of the root, on which a pod runs with kata-qemu-snp (on runc's
// shim: the guard asks only which sandboxes use the handler). berth
// uninstall and config remove refuse (exit 1), naming the pod, and
// change nothing; with --force they remove, say what they overrode, and
// the pod keeps running. A runtime that does not answer is a refusal too.
// On a root that is not a running system nothing is asked.
func TestRemovalGuardCLI(t *testing.T) {
	const handler = "kata-qemu-snp"
	n := testnode.StartRuntime(t, testnode.RuntimeOptions{Runtimes: testnode.RuntimeTable(handler, "io.containerd.runc.v2", os.Getenv(testnode.ShimEnv),
		fmt.Sprintf("    Root = %q\n", filepath.Join(t.TempDir(), "runc")))})
	bins := buildBinaries(t)
	berth := filepath.Join(bins, "berth")
	// The node's root holds the runtime's socket: the k3s socket of the
	// fixture is a link to it, inside the root, where verify resolves it.
	root := n.Dir
	if err := os.CopyFS(root, os.DirFS(filepath.Join(hostsDir, "snp-genoa-k3s-ready"))); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(root, "run/k3s/containerd/containerd.sock")
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../c.sock", sock); err != nil {
		t.Fatal(err)
	}
	rel := makeCLIRelease(t, "http://127.0.0.1:9/unplugged")
	mp, mirror := rel.write(t)
	if code, out, errOut := runBinary(t, berth, "--root", root, "install", "-p", "k3s-qemu-snp", "-m", mp, "--from", mirror); code != 0 {
		t.Fatalf("offline install: exit %d\n%s\n%s", code, out, errOut)
	}
	pod := n.RunPod(t, handler, "shop", "web-0")
	current := filepath.Join(root, "opt/berth/current")
	state := filepath.Join(root, "var/lib/berth/config-state.json")
	installed := func() bool {
		_, err := os.Lstat(current)
		b, _ := os.ReadFile(state)
		return err == nil && strings.Contains(string(b), handler)
	}
	for _, args := range [][]string{{"uninstall"}, {"uninstall", "--keep-config"}, {"config", "remove", "-p", "k3s-qemu-snp"}, {"config", "remove", "--all"}} {
		code, out, errOut := runBinary(t, berth, append([]string{"--root", root, "--live"}, args...)...)
		if code != 1 || !strings.Contains(errOut, "refusing to remove handler kata-qemu-snp: 1 pod runs on handler kata-qemu-snp on this node: shop/web-0") || !strings.Contains(errOut, "--force") {
			t.Errorf("%v with a pod on the handler: exit %d, want 1 and the pod named\n%s\n%s", args, code, out, errOut)
		}
		if !installed() {
			t.Fatalf("%v was refused but removed something", args)
		}
		t.Logf("%v: exit %d: %s", args, code, errOut)
	}
	// Not a running system: no runtime runs pods there, nothing is asked.
	offline := t.TempDir()
	if err := os.CopyFS(offline, os.DirFS(filepath.Join(hostsDir, "snp-genoa-k3s-ready"))); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runBinary(t, berth, "--root", offline, "config", "remove", "-p", "k3s-qemu-snp"); code != 0 {
		t.Errorf("config remove on a root that is not running: exit %d\n%s\n%s", code, out, errOut)
	}
	// A running system whose runtime does not answer: refused.
	if code, out, errOut := runBinary(t, berth, "--root", offline, "--live", "config", "remove", "-p", "k3s-qemu-snp"); code != 1 || !strings.Contains(errOut, "could not be asked which pods run on handler kata-qemu-snp") {
		t.Errorf("config remove with no runtime answering: exit %d, want 1 saying the runtime could not be asked\n%s\n%s", code, out, errOut)
	}

	code, out, errOut := runBinary(t, berth, "--root", root, "--live", "uninstall", "--force")
	if code != 0 || !strings.Contains(errOut, "warning: --force: removing handler kata-qemu-snp although 1 pod runs on handler kata-qemu-snp on this node: shop/web-0") {
		t.Errorf("uninstall --force: exit %d, want 0 and a warning saying what was forced\n%s\n%s", code, out, errOut)
	}
	if installed() {
		t.Error("uninstall --force left the installation")
	}
	if st := n.PodState(t, pod); st != "SANDBOX_READY" {
		t.Errorf("the pod is %s after uninstall --force: berth stops no pod", st)
	}
}
