package clustercmd

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/internal/cli"
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
