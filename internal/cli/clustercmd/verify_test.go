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
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/testkit/critest"
	"berth.dev/berth/internal/testkit/testnode"
)

func TestVerifyWithoutRuntime(t *testing.T) {
	code, out, _ := runCLI(t, "verify", "-p", "kubeadm-qemu-snp", "--socket", filepath.Join(t.TempDir(), "none.sock"), "--timeout", "300ms")
	if code != cli.ExitNotReady || !strings.Contains(out, "could not be asked") {
		t.Errorf("exit %d, out %s", code, out)
	}
}

// TestVerifyNamesUnfinishedChange: a journal berth left under --root (a
// run killed before its restart) is named with the command that
// completes it, and verify exits 1 for its handler.
func TestVerifyNamesUnfinishedChange(t *testing.T) {
	root := t.TempDir()
	in := `{"version": 1, "pending": [{"handler": "kata-qemu", "platform": "kubeadm-qemu-none"}]}`
	if err := os.MkdirAll(filepath.Join(root, "var/lib/berth"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, configure.IntentPath), []byte(in), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "--root", root, "verify", "-p", "kubeadm-qemu-none", "--socket", filepath.Join(t.TempDir(), "none.sock"), "--timeout", "300ms")
	want := "unfinished: kata-qemu was applied but the runtime was not restarted and the handler not proven live (berth config apply --platform kubeadm-qemu-none --restart)\n  complete it: berth config apply --platform kubeadm-qemu-none --restart\n"
	if code != cli.ExitNotReady || !strings.Contains(out, want) {
		t.Errorf("exit %d, out %s, err %s", code, out, errOut)
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
	// A side-by-side install of the same platform beside it.
	code, out, errOut = runCLI(t, "--root", root, "config", "apply", "-p", "kubeadm-qemu-snp", "--install-suffix", "canary", "--force", "--containerd-config-version", "3")
	if code != 0 {
		t.Fatalf("apply --install-suffix canary: exit %d\n%s\n%s", code, out, errOut)
	}
	critest.StartContainerd(t, bin, main, d)
	code, out, errOut = runCLI(t, "verify", "-p", "kubeadm-qemu-snp", "--socket", d.Sock)
	if code != 0 || !strings.Contains(out, "live in containerd") || !strings.Contains(out, "snapshotter   berth-nydus") {
		t.Errorf("verify applied platform: exit %d\n%s\n%s", code, out, errOut)
	}
	// --snapshotter: containerd has berth's proxy plugin, but no
	// nydus-snapshotter runs behind its address here (TestNydusProxyLive in
	// internal/node/configure proves the passing case with the real one).
	code, out, errOut = runCLI(t, "verify", "-p", "kubeadm-qemu-snp", "--socket", d.Sock, "--snapshotter", "--timeout", "3s")
	if code != cli.ExitNotReady || !strings.Contains(out, "snapshotter berth-nydus: NOT proven") || !strings.Contains(out, "does not answer") {
		t.Errorf("verify --snapshotter without the daemon: exit %d\n%s\n%s", code, out, errOut)
	}
	// --install-suffix: the suffixed handler and its own snapshotter; a
	// suffix nothing was installed with is not live; a bad one is refused.
	for _, tc := range []struct {
		suffix, want string
		code         int
	}{
		{"canary", `"handler": "kata-qemu-snp-canary"`, 0},
		{"canary", `"snapshotter": "berth-nydus-canary"`, 0},
		{"other", `"handler": "kata-qemu-snp-other"`, cli.ExitNotReady},
		{"Bad_Suffix", "--install-suffix", cli.ExitUsage},
	} {
		code, out, errOut := runCLI(t, "verify", "-p", "kubeadm-qemu-snp", "--socket", d.Sock, "--install-suffix", tc.suffix, "-o", "json")
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("verify --install-suffix %s: exit %d, want %d and %s\n%s\n%s", tc.suffix, code, tc.code, tc.want, out, errOut)
		}
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

// TestVerifySandbox starts a node's containerd (no kubelet) whose
// platform handlers run test shims and proves them with verify
// --sandbox: kata-qemu on runc's shim passes and leaves nothing behind,
// kata-clh on a shim that fails as Kata's does reports that shim's text
// and exits 1, and kata-qemu-snp on a Kata runtime type, verified against
// a host root without /dev/kvm, is a SKIP that never starts the shim;
// against an offline root that has dev/kvm (not probed) it is tried.
func TestVerifySandbox(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "invocations")
	n := testnode.StartSandboxHandlers(t, dir, marker)
	noKVM := t.TempDir() // a host root without dev/kvm
	// An offline host root with dev/kvm: discovery cannot open it, so the
	// sandbox itself is the probe (and the test shim fails it).
	withKVM := t.TempDir()
	if err := os.MkdirAll(filepath.Join(withKVM, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(withKVM, "dev", "kvm"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		want     []string
		shimRuns bool
	}{
		{"runc shim passes", []string{"-p", "kubeadm-qemu-none"}, 0, []string{"handler kata-qemu: live", "sandbox kata-qemu: started, stopped and removed"}, false},
		{"json", []string{"-p", "kubeadm-qemu-none", "-o", "json"}, 0, []string{`"live": true`, `"outcome": "pass"`}, false},
		{"failing shim", []string{"-p", "kubeadm-clh-none"}, cli.ExitNotReady, []string{"sandbox kata-clh: FAILED", testnode.FailShimMessage}, true},
		{"no /dev/kvm", []string{"-p", "kubeadm-qemu-snp", "--root", noKVM}, 0, []string{"sandbox kata-qemu-snp: SKIP (not proven): /dev/kvm does not exist"}, false},
		{"offline root with /dev/kvm", []string{"-p", "kubeadm-qemu-snp", "--root", withKVM}, cli.ExitNotReady, []string{"sandbox kata-qemu-snp: FAILED", testnode.FailShimMessage}, true},
		{"no /dev/kvm yaml", []string{"-p", "kubeadm-qemu-snp", "--root", noKVM, "-o", "yaml"}, 0, []string{"outcome: skip", "reason: '/dev/kvm does not exist"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(marker)
			code, out, errOut := runCLI(t, append([]string{"verify", "--socket", n.ContainerdSocket, "--sandbox", "--sandbox-timeout", "2m"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\n%s\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s\n%s", w, out, errOut)
				}
			}
			if _, err := os.Stat(marker); (err == nil) != tc.shimRuns {
				t.Errorf("shim run: %v, want %v", err == nil, tc.shimRuns)
			}
			if left := n.Sandboxes(t, ""); len(left) > 0 {
				t.Errorf("sandboxes left behind: %v", left)
			}
		})
	}
}
