package clustercmd

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/testkit/critest"
)

func TestVerifyWithoutRuntime(t *testing.T) {
	code, out, _ := runCLI(t, "verify", "-p", "kubeadm-qemu-snp", "--socket", filepath.Join(t.TempDir(), "none.sock"), "--timeout", "300ms")
	if code != cli.ExitNotReady || !strings.Contains(out, "could not be asked") {
		t.Errorf("exit %d, out %s", code, out)
	}
}

// TestVerifyLive applies a platform with the CLI, starts containerd 2.x on
// the result and asks berth verify: live for the applied platform, not for
// another one.
func TestVerifyLive(t *testing.T) {
	bin := critest.ContainerdBin(t, "BERTH_CONTAINERD2")
	root := t.TempDir()
	d := critest.NewDirs(t)
	main := filepath.Join(root, "etc/containerd/config.toml")
	if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte(critest.BaseConfig(d, 3, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "--root", root, "config", "apply", "-p", "kubeadm-qemu-snp", "--force", "--containerd-config-version", "3")
	if code != 0 {
		t.Fatalf("apply: exit %d\n%s\n%s", code, out, errOut)
	}
	critest.StartContainerd(t, bin, main, d)
	code, out, errOut = runCLI(t, "verify", "-p", "kubeadm-qemu-snp", "--socket", d.Sock)
	if code != 0 || !strings.Contains(out, "live in containerd") || !strings.Contains(out, "snapshotter   nydus") {
		t.Errorf("verify applied platform: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "verify", "-p", "kubeadm-qemu-tdx", "--socket", d.Sock, "-o", "json")
	if code != cli.ExitNotReady || !strings.Contains(out, `"live": false`) || !strings.Contains(out, `"kata-qemu-snp"`) {
		t.Errorf("verify other platform: exit %d\n%s", code, out)
	}

	// Node.status.runtimeHandlers through a kubeconfig: a fake API server
	// with a node that lists the handler and one that does not.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handlers := map[string]string{"/api/v1/nodes/n1": `[{"name":"kata-qemu-snp"},{"name":"runc"}]`, "/api/v1/nodes/n2": `[{"name":"runc"}]`}
		h, ok := handlers[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"apiVersion":"v1","kind":"Node","metadata":{"name":%q},"status":{"runtimeHandlers":%s}}`, path.Base(r.URL.Path), h)
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, srv.URL)), 0o600)
	for _, tc := range []struct {
		node, want string
		code       int
	}{{"n1", "lists kata-qemu-snp", 0}, {"n2", "does NOT list", cli.ExitNotReady}, {"n3", "node n3: unknown", cli.ExitNotReady}} {
		code, out, errOut := runCLI(t, "verify", "-p", "kubeadm-qemu-snp", "--socket", d.Sock, "--kubeconfig", kc, "--node", tc.node)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("node %s: exit %d\n%s\n%s", tc.node, code, out, errOut)
		}
	}
}
