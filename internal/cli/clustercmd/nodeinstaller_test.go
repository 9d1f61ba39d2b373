package clustercmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodeinstall"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/testkit/testenv"
	"berth.dev/berth/internal/testkit/treetest"
)

const pin = "@sha256:0000000000000000000000000000000000000000000000000000000000000000"

// TestNodeInstallerUsage: what the node-installer refuses before it
// touches the cluster or the host (exit 2, saying why).
func TestNodeInstallerUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no node name", []string{"node-installer", "-p", "kubeadm-qemu-none", "-m", "m.yaml" + pin}, "NODE_NAME"},
		{"no platform", []string{"node-installer", "--node-name", "n", "-m", "m.yaml" + pin}, "--platform is required"},
		{"no manifest", []string{"node-installer", "--node-name", "n", "-p", "kubeadm-qemu-none"}, "--manifest is required"},
		{"unpinned manifest", []string{"node-installer", "--node-name", "n", "-p", "kubeadm-qemu-none", "-m", "m.yaml"}, "not pinned"},
		{"bad mode", []string{"node-installer", "--node-name", "n", "--mode", "upgrade"}, "expected install or cleanup"},
		{"relative prefix", []string{"node-installer", "--node-name", "n", "-p", "kubeadm-qemu-none", "-m", "m.yaml" + pin, "--prefix", "opt/berth"}, "absolute"},
		{"custom flags for kubeadm", []string{"node-installer", "--node-name", "n", "-p", "kubeadm-qemu-none", "-m", "m.yaml" + pin, "--runtime-unit", "x.service"}, "custom distribution"},
		{"custom without its runtime", []string{"node-installer", "--node-name", "n", "-p", "custom-qemu-none", "-m", "m.yaml" + pin}, "--containerd-config"},
		{"restart lease without namespace", []string{"node-installer", "--node-name", "n", "-p", "kubeadm-qemu-none", "-m", "m.yaml" + pin, "--restart-lease", "berth-restart"}, "expected NAMESPACE/NAME"},
		{"restart concurrency without its lease", []string{"node-installer", "--node-name", "n", "-p", "kubeadm-qemu-none", "-m", "m.yaml" + pin, "--max-concurrent-restarts", "5"}, "needs --restart-lease"},
		{"unknown check to ignore", []string{"node-installer", "--node-name", "n", "-p", "kubeadm-qemu-none", "-m", "m.yaml" + pin, "--ignore", "no.such.check"}, "no.such.check"},
		{"startup taint with a value but no effect", []string{"node-installer", "--node-name", "n", "-p", "kubeadm-qemu-none", "-m", "m.yaml" + pin, "--startup-taint", "berth.dev/runtime-not-ready=true"}, "--startup-taint"},
		{"startup taint with a bad effect", []string{"node-installer", "--node-name", "n", "-p", "kubeadm-qemu-none", "-m", "m.yaml" + pin, "--startup-taint", "berth.dev/runtime-not-ready:NoRun"}, "NoSchedule, PreferNoSchedule or NoExecute"},
		{"teardown without its daemonset", []string{"node-installer", "teardown", "--namespace", "berth-system"}, "--daemonset"},
		{"teardown with a daemonset and jobs", []string{"node-installer", "teardown", "--namespace", "berth-system", "--daemonset", "d", "--job-template", "j.yaml"}, "one of --daemonset and --job-template"},
		{"dispatch without namespace", []string{"node-installer", "dispatch", "--job-template", "j.yaml"}, "--namespace is required"},
		{"dispatch with a bad mode", []string{"node-installer", "dispatch", "--namespace", "n", "--job-template", "j.yaml", "--mode", "upgrade"}, "expected install or cleanup"},
		{"dispatch without its template", []string{"node-installer", "dispatch", "--namespace", "n", "--job-template", "/no/such/job.yaml"}, "--job-template"},
		{"dispatch with a bad selector", []string{"node-installer", "dispatch", "--namespace", "n", "--job-template", "j.yaml", "--node-selector", "a b"}, "--node-selector"},
		{"dispatch at no parallelism", []string{"node-installer", "dispatch", "--namespace", "n", "--job-template", "j.yaml", "--parallelism", "0"}, "--parallelism 0"},
		{"dispatch with a template that never ends", []string{"node-installer", "dispatch", "--namespace", "n", "--job-template", "testdata/job-template-no-run-once.yaml"}, "without --run-once"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, errOut, tc.want)
			}
		})
	}
}

// TestNodeInstallerProcess runs the berth-cluster binary as the
// DaemonSet's container would, against a real API server, on a node
// whose platform is not ready (fixture cloud-vm-no-nested: nothing is
// installed, so no runtime is needed): it labels the node, records the
// Event, prints its report, serves /readyz once done and keeps running
// until SIGTERM, which ends it with status 0. Run again with
// BERTH_NODE_INSTALLER_MODE=cleanup (what the teardown sets), it removes
// its label. The host root is never written.
func TestNodeInstallerProcess(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	dir := t.TempDir()
	bin := filepath.Join(dir, "berth-cluster")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/berth-cluster").CombinedOutput(); err != nil {
		t.Fatalf("building berth-cluster: %v\n%s", err, out)
	}
	kc := filepath.Join(dir, "kubeconfig")
	writeKubeconfig(t, kc, env.Admin)
	cs := testenv.Clientset(t, env.Admin)
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cli-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "host")
	treetest.Copy(t, filepath.Join("..", "..", "..", "testdata", "hosts", "cloud-vm-no-nested"), root)
	before := treetest.Listing(t, root)
	man := []byte("apiVersion: berth.dev/manifest/v1\nname: kata-cli\nversion: \"1\"\ncomponents:\n  - name: containerd-shim-kata-v2\n    version: \"1\"\n    sources: [http://127.0.0.1:9/shim]\n    sha256: " +
		strings.Repeat("ab", 32) + "\n    size: 10\n    path: bin/containerd-shim-kata-v2\n    mode: \"0755\"\n")
	mp := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(mp, man, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(man)

	run := func(t *testing.T, mode string) map[string]string {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		var out, errOut bytes.Buffer
		c := exec.Command(bin, "--root", root, "node-installer", "-p", "kubeadm-qemu-none", "-m", mp+"@sha256:"+hex.EncodeToString(sum[:]),
			"--kubeconfig", kc, "--health-addr", addr, "--restart-lease", "default/cli-restart")
		c.Env = append(os.Environ(), "NODE_NAME=cli-1", nodeinstall.ModeEnv+"="+mode)
		c.Stdout, c.Stderr = &out, &errOut
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		deadline := time.Now().Add(60 * time.Second)
		for {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case err := <-done:
				t.Fatalf("node-installer exited before it was ready: %v\n%s\n%s", err, out.String(), errOut.String())
			default:
			}
			if time.Now().After(deadline) {
				c.Process.Kill()
				t.Fatalf("/readyz not ok within 60 s\n%s", errOut.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		// Still running after its work: the DaemonSet's pod stays up.
		time.Sleep(200 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("node-installer exited after its work: %v", err)
		default:
		}
		c.Process.Signal(syscall.SIGTERM)
		if err := <-done; err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, errOut.String())
		}
		var rep nodeinstall.Report
		if err := json.Unmarshal(bytes.TrimSpace(out.Bytes()), &rep); err != nil || string(rep.Mode) != mode || rep.Node != "cli-1" {
			t.Fatalf("report %q: %v", out.String(), err)
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, "cli-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return node.Labels
	}

	t.Run("install", func(t *testing.T) {
		if got := run(t, "install")["berth.dev/installed.kubeadm-qemu-none"]; got != "no" {
			t.Errorf("label %q, want no", got)
		}
		evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=cli-1"})
		if err != nil || len(evs.Items) != 1 || evs.Items[0].Reason != nodeinstall.ReasonNotReady {
			t.Errorf("events: %v %+v", err, evs)
		}
		// The record the agent publishes: the release and the platform's
		// state with its first failing check.
		node, err := cs.CoreV1().Nodes().Get(ctx, "cli-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := nodereport.DecodeInstall(node.Annotations[v1alpha1.InstallStatusAnnotation])
		if err != nil {
			t.Fatal(err)
		}
		if rec.Version != "1" || rec.Digest != "sha256:"+hex.EncodeToString(sum[:]) || len(rec.Platforms) != 1 ||
			rec.Platforms[0].State != v1alpha1.InstallNotReady || !strings.HasPrefix(rec.Platforms[0].Error, "virt.hardware: ") {
			t.Errorf("install record %+v", rec)
		}
	})
	t.Run("cleanup", func(t *testing.T) {
		if l, ok := run(t, "cleanup")["berth.dev/installed.kubeadm-qemu-none"]; ok {
			t.Errorf("label left after cleanup: %q", l)
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, "cli-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := node.Annotations[v1alpha1.InstallStatusAnnotation]; ok {
			t.Errorf("install record left after cleanup: %s", v)
		}
	})
	// Job mode's per-node run: it ends on its own, 1 when a platform is
	// not installed (with the record written as the DaemonSet's run
	// writes it), 0 when the run did everything (cleanup here).
	once := func(t *testing.T, mode string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		c := exec.Command(bin, "--root", root, "node-installer", "--run-once", "-p", "kubeadm-qemu-none", "-m", mp+"@sha256:"+hex.EncodeToString(sum[:]),
			"--kubeconfig", kc)
		c.Env = append(os.Environ(), "NODE_NAME=cli-1", nodeinstall.ModeEnv+"="+mode)
		c.Stdout, c.Stderr = &out, &errOut
		err := c.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, errOut.String()
		case errors.As(err, &ee):
			return ee.ExitCode(), errOut.String()
		}
		t.Fatal(err)
		return 0, ""
	}
	t.Run("run once, not ready", func(t *testing.T) {
		code, errOut := once(t, "install")
		if code != 1 || !strings.Contains(errOut, "not installed: kubeadm-qemu-none (virt.hardware)") {
			t.Errorf("exit %d, stderr %s; want 1 naming the platform and its check", code, errOut)
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, "cli-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rec, err := nodereport.DecodeInstall(node.Annotations[v1alpha1.InstallStatusAnnotation])
		if err != nil || len(rec.Platforms) != 1 || rec.Platforms[0].State != v1alpha1.InstallNotReady {
			t.Errorf("install record %+v, %v", rec, err)
		}
	})
	t.Run("run once, cleanup", func(t *testing.T) {
		if code, errOut := once(t, "cleanup"); code != 0 {
			t.Errorf("exit %d, stderr %s; want 0", code, errOut)
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, "cli-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := node.Labels["berth.dev/installed.kubeadm-qemu-none"]; ok {
			t.Error("label left after a run-once cleanup")
		}
	})
	// Nothing was restarted (the platform is not ready), so the cluster's
	// restart lock was never taken.
	if _, err := cs.CoordinationV1().Leases("default").Get(ctx, "cli-restart", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("restart Lease: %v, want NotFound: a run that restarts nothing takes no lock", err)
	}
	if after := treetest.Listing(t, root); after != before {
		t.Error(fmt.Sprintf("the host root changed:\n--- before\n%s\n--- after\n%s", before, after))
	}
}
