// Package critest starts real containerd daemons for tests, confined to
// temporary root, state and socket paths, and fails loudly when the
// binaries the CI installs (.ci/tools.sh) are missing.
package critest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"berth.dev/berth/internal/cri"
)

// ContainerdBin returns the containerd binary named by env, failing the
// test loudly when the tools were not installed: these tests are the proof
// that what berth writes is what containerd loads, so they never skip.
func ContainerdBin(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set: run `make tools` (.ci/tools.sh) and source .ci/tools.env", env)
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		t.Fatalf("%s=%s: not a binary (%v): run `make tools`", env, p, err)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("the containerd integration tests run containerd and must run as root")
	}
	return p
}

// Dirs are containerd's own root, state and sockets: short paths
// outside the host root (unix socket paths are limited to 108 bytes).
type Dirs struct{ Dir, Sock string }

func NewDirs(t *testing.T) Dirs {
	t.Helper()
	dir, err := os.MkdirTemp("", "bc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return Dirs{Dir: dir, Sock: filepath.Join(dir, "c.sock")}
}

// BaseConfig is a kubeadm-style main config of version v that keeps the
// daemon off the host: its own root, state and sockets, no privileged
// snapshotters, and CRI settings that pull nothing.
func BaseConfig(d Dirs, v int, imports string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version = %d\n", v)
	if imports != "" {
		fmt.Fprintf(&b, "imports = [%q]\n", imports)
	}
	fmt.Fprintf(&b, "root = %q\nstate = %q\n", filepath.Join(d.Dir, "root"), filepath.Join(d.Dir, "state"))
	b.WriteString(`disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp"]` + "\n")
	fmt.Fprintf(&b, "\n[grpc]\n  address = %q\n\n[ttrpc]\n  address = %q\n\n[debug]\n  address = %q\n",
		d.Sock, d.Sock+".ttrpc", d.Sock+".debug")
	cni := fmt.Sprintf("  [plugins.%%q.cni]\n    bin_dir = %q\n    conf_dir = %q\n", filepath.Join(d.Dir, "cni/bin"), filepath.Join(d.Dir, "cni/conf"))
	if v == 2 {
		fmt.Fprintf(&b, "\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %q\n", filepath.Join(d.Dir, "opt"))
		b.WriteString(`
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`)
		fmt.Fprintf(&b, cni, "io.containerd.grpc.v1.cri")
		return b.String()
	}
	b.WriteString(`
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "registry.k8s.io/pause:3.10"

[plugins."io.containerd.cri.v1.runtime"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
`)
	fmt.Fprintf(&b, cni, "io.containerd.cri.v1.runtime")
	return b.String()
}

// StartContainerd runs bin with config and waits for its CRI service to
// answer; the returned function (also run at cleanup) kills it.
func StartContainerd(t *testing.T, bin, config string, d Dirs) func() {
	t.Helper()
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config", config)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		os.Remove(d.Sock)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := cri.Query(context.Background(), d.Sock, time.Second); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("%s --config %s exited: %v\n%s", bin, config, err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("%s did not answer CRI on %s within 20s\n%s", bin, d.Sock, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var once sync.Once
	stopOnce := func() { once.Do(stop) }
	t.Cleanup(stopOnce)
	return stopOnce
}
