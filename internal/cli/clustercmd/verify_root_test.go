package clustercmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/unixsock"
)

// TestVerifyRootSocket: `berth verify --root R` (with --sandbox) reaches
// the runtime socket of R only. R's containerd socket is a link to an
// absolute path where this machine has a listener: berth must not dial
// it (the kernel would resolve the link on this machine), but the
// listener at that path inside R, as a chroot into R resolves the link.
func TestVerifyRootSocket(t *testing.T) {
	hostSock := filepath.Join(t.TempDir(), "host.sock")
	outside := unixsock.Accepts(t, hostSock)
	root := t.TempDir()
	link := filepath.Join(root, "run/containerd/containerd.sock")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostSock, link); err != nil {
		t.Fatal(err)
	}
	verify := func() (int, string) {
		code, out, errOut := runCLI(t, "--root", root, "verify", "-p", "kubeadm-qemu-snp", "--sandbox", "--snapshotter", "--timeout", "500ms")
		return code, out + errOut
	}
	// Nothing at the link's target inside the root: not asked at all.
	if code, out := verify(); code != cli.ExitNotReady {
		t.Errorf("exit %d, want %d\n%s", code, cli.ExitNotReady, out)
	}
	select {
	case <-outside:
		t.Fatal("berth dialled the socket outside the root")
	case <-time.After(100 * time.Millisecond):
	}
	// A listener where the link leads inside the root gets the call
	// (it speaks no CRI, so verify still exits 1).
	inside := unixsock.Accepts(t, filepath.Join(root, hostSock))
	if code, out := verify(); code != cli.ExitNotReady {
		t.Errorf("exit %d, want %d\n%s", code, cli.ExitNotReady, out)
	}
	select {
	case <-inside:
	case <-time.After(5 * time.Second):
		t.Fatal("the listener inside the root got no connection")
	}
	select {
	case <-outside:
		t.Fatal("berth dialled the socket outside the root")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestVerifyRootSocketLive: with a real containerd whose socket the
// root's /run/containerd/containerd.sock names by an absolute link (as
// a chroot reads it), `berth --root R verify` finds the applied handler
// live, and proves its snapshotter entry over the same socket.
func TestVerifyRootSocketLive(t *testing.T) {
	bin := critest.ContainerdBin(t, "BERTH_CONTAINERD2")
	d := critest.NewDirs(t)
	root := d.Dir // the socket is <root>/c.sock
	main := filepath.Join(root, "etc/containerd/config.toml")
	if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(critest.BaseConfig(d, 3, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := runCLI(t, "--root", root, "config", "apply", "-p", "kubeadm-qemu-snp", "--force", "--containerd-config-version", "3"); code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	link := filepath.Join(root, "run/containerd/containerd.sock")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/"+filepath.Base(d.Sock), link); err != nil {
		t.Fatal(err)
	}
	critest.StartContainerd(t, bin, main, d)
	code, out, errOut := runCLI(t, "--root", root, "verify", "-p", "kubeadm-qemu-snp", "-o", "json")
	if code != 0 || !strings.Contains(out, `"live": true`) || !strings.Contains(out, `"socket": "`+link+`"`) {
		t.Errorf("verify --root: exit %d\n%s\n%s", code, out, errOut)
	}
	// The snapshotter proof goes over the same socket: containerd has
	// berth's proxy plugin, no nydus-snapshotter runs behind it here.
	code, out, errOut = runCLI(t, "--root", root, "verify", "-p", "kubeadm-qemu-snp", "--snapshotter", "--timeout", "3s")
	if code != cli.ExitNotReady || !strings.Contains(out, "does not answer") {
		t.Errorf("verify --root --snapshotter: exit %d\n%s\n%s", code, out, errOut)
	}
}
