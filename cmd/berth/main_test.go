package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoClusterDependencies keeps client-go, gRPC and the CRI API out of
// berth: they cost the host commands ~5 ms of start-up and ~7 MiB of RSS
// (README, "Two binaries"), so they belong to berth-cluster only. So do
// the HTTP and TLS stack and the zstd decoder (install, bundle, check
// --network): their initialisation was half of berth's start-up. And the
// progress-bar library berth replaced, whose initialisation compiled a
// regular expression. And the D-Bus client: berth restarts a runtime
// with the host's systemctl, the node-installer through D-Bus.
func TestNoClusterDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/client-go/", "google.golang.org/grpc", "k8s.io/cri-api/", "berth.dev/berth/internal/cli/clustercmd",
			"net/http", "crypto/tls", "github.com/klauspost/compress", "berth.dev/berth/internal/cli/installcmd", "berth.dev/berth/internal/node/install",
			"berth.dev/berth/internal/node/fetch", "berth.dev/berth/internal/host/netprobe", "github.com/vbauerster/mpb", "github.com/acarl005/stripansi",
			"github.com/godbus/dbus", "berth.dev/berth/internal/node/runtimectl/systemdbus", "berth.dev/berth/internal/node/cri"} {
			if strings.HasPrefix(dep+"/", banned) || strings.HasPrefix(dep, banned) {
				t.Errorf("berth links %s", dep)
			}
		}
	}
}

// TestDelegation builds both binaries side by side, as make build and the
// image do, and runs a cluster command through berth.
func TestDelegation(t *testing.T) {
	dir := t.TempDir()
	berth, cluster := filepath.Join(dir, "berth"), filepath.Join(dir, "berth-cluster")
	for bin, pkg := range map[string]string{berth: ".", cluster: "../berth-cluster"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	run := func(bin string, env []string, args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		c := exec.Command(bin, args...)
		c.Env, c.Stdout, c.Stderr = env, &stdout, &stderr
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), stderr.String()
	}
	env := []string{"PATH=/usr/bin:/bin"}
	args := []string{"-o", "json", "runtimeclasses", "-p", "kubeadm-qemu-snp"}
	wantCode, want, _ := run(cluster, env, args...)
	code, got, errOut := run(berth, env, args...)
	if code != 0 || wantCode != 0 || got != want || !strings.Contains(got, `"handler": "kata-qemu-snp"`) {
		t.Errorf("berth %v: exit %d (berth-cluster %d)\n%s\n%s\nwant\n%s", args, code, wantCode, got, errOut, want)
	}
	// The exit code of the delegate is berth's.
	if code, _, errOut := run(berth, env, "runtimeclasses", "-p", "nonsense"); code != 2 || !strings.Contains(errOut, "nonsense") {
		t.Errorf("bad platform through berth: exit %d, %s", code, errOut)
	}
	// berth alone: a clear error naming what is missing and how to get it.
	lone := filepath.Join(t.TempDir(), "berth")
	b, err := os.ReadFile(berth)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run(lone, []string{"PATH=" + t.TempDir()}, "fleet")
	if code != 2 || !strings.Contains(errOut, "berth-cluster, which was not found") || !strings.Contains(errOut, "make build") {
		t.Errorf("berth fleet without berth-cluster: exit %d, %s", code, errOut)
	}
	// BERTH_CLUSTER names it explicitly.
	code, got, errOut = run(lone, []string{"PATH=" + t.TempDir(), "BERTH_CLUSTER=" + cluster}, args...)
	if code != 0 || got != want {
		t.Errorf("BERTH_CLUSTER: exit %d, %s", code, errOut)
	}
	// install, uninstall, rollback, bundle, check --network and refvalues
	// --installed run it too.
	for _, a := range [][]string{
		{"install", "--help"},
		{"bundle", "--help"},
		{"check", "--root", "../../testdata/hosts/sriov-nic-vgpu-host", "--network", "--registry", "ftp://mirror"},
		{"check", "--root", "../../testdata/hosts/sriov-nic-vgpu-host", "--network", "-p", "kata-qemu", "-o", "json"},
		// refvalues --installed reads an installation with the installer's
		// code: here, the error that the fixture has none.
		{"refvalues", "--root", "../../testdata/hosts/sriov-nic-vgpu-host", "--platform", "kata-qemu-snp", "--installed"},
	} {
		pinned := append(env, "SOURCE_DATE_EPOCH=1767225600") // the report's clock
		wantCode, want, wantErr := run(cluster, pinned, a...)
		code, got, errOut := run(berth, pinned, a...)
		if code != wantCode || got != want || errOut != wantErr || got+errOut == "" {
			t.Errorf("berth %v: exit %d (berth-cluster %d)\n%s%s\nwant\n%s%s", a, code, wantCode, got, errOut, want, wantErr)
		}
	}
	// Host commands never need it.
	if code, out, errOut := run(lone, []string{"PATH=" + t.TempDir()}, "version"); code != 0 || !strings.Contains(out, "berth") {
		t.Errorf("berth version alone: exit %d, %s %s", code, out, errOut)
	}
}
