package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/testrelease"
	"berth.dev/berth/internal/testkit/upstreamtest"
)

// shimMessage starts what failshim prints (failshim.Message).
const shimMessage = "berth-e2e-shim: invoked by containerd"

// shimOKSuffix names the file beside the shim's marker that switches it
// to serving (failshim.OKSuffix).
const shimOKSuffix = ".ok"

// buildFailShim builds ./internal/cluster/e2e/failshim recording into marker.
func buildFailShim(t *testing.T, dir, marker string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the test shim needs the go command: %v", err)
	}
	out := filepath.Join(dir, "failshim")
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags", "-s -w -X main.marker="+marker, "-o", out, "./internal/cluster/e2e/failshim")
	cmd.Dir = upstreamtest.RepoRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building failshim: %v\n%s", err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// serveRelease serves a release whose shim is shim on a loopback mirror
// (internal/testkit/testrelease): the manifest's own URLs lead to a closed port,
// so every byte the node-installer installs came through the mirror. Its
// containerd-nydus-grpc is the real one (.ci/tools.sh's), which the
// nydus platform's unit runs.
func serveRelease(t *testing.T, shim []byte) *testrelease.Release {
	t.Helper()
	testkit.NeedsTools(t, "containerd-nydus-grpc (BERTH_NYDUS_SNAPSHOTTER)")
	bin := os.Getenv("BERTH_NYDUS_SNAPSHOTTER")
	if bin == "" {
		t.Fatal("BERTH_NYDUS_SNAPSHOTTER is not set: run `make tools` (.ci/tools.sh) and source .ci/tools.env")
	}
	nydus, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return testrelease.Serve(t, testrelease.Options{Name: "kata-e2e", Version: "1.0.0", Shim: shim, Nydus: nydus})
}
