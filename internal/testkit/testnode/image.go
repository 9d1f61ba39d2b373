package testnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit/upstreamtest"
)

// Images the node knows without a registry (the tests have no network).
const (
	// AgentImage is the reference `make image` tags the agent with.
	AgentImage = "ghcr.io/berth-dev/berth-agent:latest"
	// PauseImage is the sandbox image the node's containerd pins: a build
	// of ./pause, imported by Start.
	PauseImage = "berth.test/testnode/pause:1"
)

// BuildAgentImage builds the agent image as `make image` does (a static
// berth-cluster at /berth, through tools/ociimage) into dir and returns
// the tarball's path, tagged AgentImage.
func BuildAgentImage(t testing.TB, dir string) string {
	t.Helper()
	return buildImage(t, dir, "./cmd/berth-cluster", "berth-agent", AgentImage)
}

// buildImage builds pkg (relative to the repository root) as a static
// linux/amd64 binary and wraps it with tools/ociimage into
// dir/<name>.tar tagged tag.
func buildImage(t testing.TB, dir, pkg, name, tag string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the %s image needs the go command: %v", name, err)
	}
	root := upstreamtest.RepoRoot(t)
	bin := filepath.Join(dir, name+"-linux-amd64")
	runCmd(t, root, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}, goBin, "build", "-trimpath",
		"-ldflags", "-s -w -X berth.dev/berth/internal/cli/buildinfo.version=testnode", "-o", bin, pkg)
	tool := filepath.Join(dir, "ociimage")
	if _, err := os.Stat(tool); err != nil {
		runCmd(t, filepath.Join(root, "tools", "ociimage"), nil, goBin, "build", "-o", tool, ".")
	}
	tar := filepath.Join(dir, name+".tar")
	runCmd(t, dir, nil, tool, "build", "-binary", bin, "-o", tar, "-tag", tag, "-version", "testnode")
	return tar
}

func runCmd(t testing.TB, dir string, env []string, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s (in %s): %v\n%s", argv, dir, err, out)
	}
}

// ImportImage loads an image tarball (docker-archive or OCI layout, as
// `ctr images import` reads) into the node's containerd, namespace
// k8s.io, where the CRI plugin and so the kubelet see it: pods can then
// run it with imagePullPolicy Never.
func (n *Node) ImportImage(t testing.TB, tarPath string) {
	t.Helper()
	if err := n.importImage(context.Background(), tarPath); err != nil {
		t.Fatal(err)
	}
}

func (n *Node) importImage(ctx context.Context, tarPath string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, n.ctr, "--address", n.ContainerdSocket, "--namespace", "k8s.io",
		"images", "import", tarPath).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s images import %s into node %s: %v\n%s", n.ctr, tarPath, n.Name, err, out)
	}
	return nil
}

// FailShimMessage starts what the failing test shim prints before it fails
// (internal/cluster/e2e/failshim's Message).
const FailShimMessage = "berth-e2e-shim: invoked by containerd"

// BuildFailShim builds internal/cluster/e2e/failshim, the stand-in for a
// Kata shim that fails as Kata's does where no VM can boot, into
// dir/failshim and returns its path. Each invocation appends a line to
// marker, so that a test can tell whether containerd ran it at all.
func BuildFailShim(t testing.TB, dir, marker string) string {
	t.Helper()
	return buildShim(t, dir, "-X main.marker="+marker)
}

// ShimGivenPrefix starts the marker line in which a shim built by
// BuildConfigShim records what containerd handed it, as JSON (failshim's
// Given: configPath, config, dropIns, error).
const ShimGivenPrefix = "given "

// BuildConfigShim is BuildFailShim whose shim also records, on each start,
// what containerd handed it: the ConfigPath of the handler's runtime
// options and the Kata configuration there (read under root) merged with
// its config.d drop-ins as Kata's runtime merges them.
func BuildConfigShim(t testing.TB, dir, marker, root string) string {
	t.Helper()
	return buildShim(t, dir, "-X main.marker="+marker+" -X main.root="+root)
}

func buildShim(t testing.TB, dir, vars string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building the test shim needs the go command: %v", err)
	}
	out := filepath.Join(dir, "failshim")
	runCmd(t, upstreamtest.RepoRoot(t), []string{"CGO_ENABLED=0"}, goBin, "build", "-trimpath",
		"-ldflags", "-s -w "+vars, "-o", out, "./internal/cluster/e2e/failshim")
	return out
}
