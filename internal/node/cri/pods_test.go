package cri_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit/testnode"
)

// TestRunningPods lists, over a real containerd, the pods running on a
// handler as the guards see them: a pod on kata-qemu (runc's shim here)
// is listed with its namespace and name, a stopped one and berth's own
// proving sandbox are not, nor a pod of another handler; a socket nobody
// serves is an error, never an empty list.
func TestRunningPods(t *testing.T) {
	dir := t.TempDir()
	n := testnode.StartSandboxHandlers(t, dir, filepath.Join(dir, "marker"))
	ep := cri.Endpoint{Path: n.ContainerdSocket}
	ctx := context.Background()
	n.RunPod(t, "kata-qemu", "shop", "web-0")
	stopped := n.RunPod(t, "kata-qemu", "shop", "web-1")
	stopPod(t, n, stopped)
	if st := n.PodState(t, stopped); st != "SANDBOX_NOTREADY" {
		t.Fatalf("stopped sandbox is %s", st)
	}
	for _, tc := range []struct {
		handlers []string
		want     []string
	}{
		{[]string{"kata-qemu"}, []string{"shop/web-0"}},
		{[]string{"kata-qemu-snp", "kata-qemu"}, []string{"shop/web-0"}},
		{[]string{"kata-qemu-snp"}, nil},
		{nil, nil},
	} {
		pods, err := ep.RunningPods(ctx, tc.handlers, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range pods {
			got = append(got, p.String())
			if p.Handler != "kata-qemu" || p.ID == "" {
				t.Errorf("pod %+v: want handler kata-qemu and an id", p)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("pods on %v: %v, want %v", tc.handlers, got, tc.want)
		}
	}
	// berth's proving sandbox is not a pod of the node's.
	if _, err := ep.ProveSandbox(ctx, "kata-qemu", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	gone := cri.Endpoint{Path: filepath.Join(dir, "nobody.sock")}
	if pods, err := gone.RunningPods(ctx, []string{"kata-qemu"}, 2*time.Second); err == nil {
		t.Errorf("a socket nobody serves: %v and no error", pods)
	}
}

// rsClient is a CRI client of sock, closed at the test's end.
func rsClient(t *testing.T, sock string) runtimeapi.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

// runSandbox starts a sandbox with handler, metadata md and labels.
func runSandbox(t *testing.T, sock, handler string, md *runtimeapi.PodSandboxMetadata, labels map[string]string) string {
	t.Helper()
	resp, err := rsClient(t, sock).RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{RuntimeHandler: handler,
		Config: &runtimeapi.PodSandboxConfig{Metadata: md, Labels: labels, Linux: &runtimeapi.LinuxPodSandboxConfig{}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.PodSandboxId
}

// stopPod stops the sandbox id (it stays listed, not ready).
func stopPod(t *testing.T, n *testnode.Node, id string) {
	t.Helper()
	if _, err := rsClient(t, n.ContainerdSocket).StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
}
