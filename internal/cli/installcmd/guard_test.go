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

// TestRemovalGuardCustomRuntime: a custom runtime's pods block the removal
// of that custom runtime and of its base (which takes it along), and the
// base's own pods do not block removing the custom runtime alone.
func TestRemovalGuardCustomRuntime(t *testing.T) {
	const base, custom = "kata-qemu-snp", "shop-snp"
	runc := func(name string) string {
		return testnode.RuntimeTable(name, "io.containerd.runc.v2", os.Getenv(testnode.ShimEnv),
			fmt.Sprintf("    Root = %q\n", filepath.Join(t.TempDir(), "runc")))
	}
	n := testnode.StartRuntime(t, testnode.RuntimeOptions{Runtimes: runc(base) + runc(custom)})
	bins := buildBinaries(t)
	berth := filepath.Join(bins, "berth")
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
	for _, args := range [][]string{
		{"config", "apply", "-p", "k3s-qemu-snp"},
		{"config", "apply", "-p", "k3s-qemu-snp", "--custom-runtime", custom},
	} {
		if code, out, errOut := runBinary(t, berth, append([]string{"--root", root}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
	n.RunPod(t, custom, "shop", "batch-0")
	state := filepath.Join(root, "var/lib/berth/config-state.json")
	configured := func(h string) bool {
		b, _ := os.ReadFile(state)
		return strings.Contains(string(b), `"`+h+`"`)
	}
	refusal := "refusing to remove handler " + custom + ": 1 pod runs on handler " + custom + " on this node: shop/batch-0"
	for _, tc := range []struct {
		args    []string
		refused bool
	}{
		{[]string{"config", "remove", "-p", "k3s-qemu-snp", "--custom-runtime", custom}, true},
		{[]string{"config", "remove", "--all"}, true},
	} {
		code, out, errOut := runBinary(t, berth, append([]string{"--root", root, "--live"}, tc.args...)...)
		if code != 1 || !strings.Contains(errOut, "shop/batch-0") || !strings.Contains(errOut, custom) {
			t.Errorf("%v with a pod on the custom runtime: exit %d, want 1 naming the pod (%s)\n%s\n%s", tc.args, code, refusal, out, errOut)
		}
		if !configured(custom) || !configured(base) {
			t.Fatalf("%v was refused but removed something", tc.args)
		}
	}
	// The base alone: the custom runtime's pod is not on it.
	if code, out, errOut := runBinary(t, berth, "--root", root, "--live", "config", "remove", "-p", "k3s-qemu-snp"); code != 0 {
		t.Errorf("config remove of the base, no pod on it: exit %d, want 0\n%s\n%s", code, out, errOut)
	}
	if configured(base) {
		t.Error("config remove of the base left its handler")
	}
}
