package main

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	taskapi "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/ttrpc"
)

// TestOKMode runs the built shim as containerd 2.x does (start, then the
// task API over ttrpc) and checks a task's life: a real process that
// runs until killed, and a server that ends once containerd's socket
// directory is gone.
func TestOKMode(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "marker")
	bin := filepath.Join(dir, "shim")
	build := exec.Command("go", "build", "-o", bin, "-ldflags", "-X main.marker="+marker, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the shim: %v\n%s", err, out)
	}
	// containerd's socket: the server lives while its directory exists.
	address := filepath.Join(dir, "containerd", "containerd.sock")
	shim := func(args ...string) ([]byte, error) {
		cmd := exec.Command(bin, append([]string{"-namespace", "k8s.io", "-address", address, "-id", "sandbox1"}, args...)...)
		cmd.Stdin = strings.NewReader("")
		return cmd.Output()
	}
	// Without the switch the shim fails, as the real node test's first
	// steps need.
	if _, err := shim("start"); err == nil {
		t.Fatal("start without the OK switch succeeded, want the failure")
	}
	if err := os.WriteFile(marker+OKSuffix, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Dir(address), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := shim("start")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var params struct {
		Version  int    `json:"version"`
		Address  string `json:"address"`
		Protocol string `json:"protocol"`
	}
	if err := json.Unmarshal(out, &params); err != nil || params.Version != 3 || params.Protocol != "ttrpc" || !strings.HasPrefix(params.Address, "unix://") {
		t.Fatalf("start printed %q (%v), want containerd 2.x's bootstrap parameters", out, err)
	}
	conn, err := net.Dial("unix", strings.TrimPrefix(params.Address, "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	client := ttrpc.NewClient(conn)
	defer client.Close()
	tc := taskapi.NewTTRPCTaskClient(client)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	created, err := tc.Create(ctx, &taskapi.CreateTaskRequest{ID: "sandbox1", Bundle: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(int(created.Pid), 0); err != nil {
		t.Fatalf("task pid %d: %v, want a live process", created.Pid, err)
	}
	steps := []struct {
		name string
		do   func() error
		want task.Status
	}{
		{"start", func() error { _, err := tc.Start(ctx, &taskapi.StartRequest{ID: "sandbox1"}); return err }, task.Status_RUNNING},
		{"kill", func() error {
			if _, err := tc.Kill(ctx, &taskapi.KillRequest{ID: "sandbox1", Signal: uint32(syscall.SIGKILL)}); err != nil {
				return err
			}
			_, err := tc.Wait(ctx, &taskapi.WaitRequest{ID: "sandbox1"})
			return err
		}, task.Status_STOPPED},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		st, err := tc.State(ctx, &taskapi.StateRequest{ID: "sandbox1"})
		if err != nil || st.Status != s.want || st.Pid != created.Pid {
			t.Fatalf("after %s: state %v (%v), want %v with pid %d", s.name, st, err, s.want, created.Pid)
		}
	}
	if d, err := tc.Delete(ctx, &taskapi.DeleteRequest{ID: "sandbox1"}); err != nil || d.ExitStatus != 128+uint32(syscall.SIGKILL) {
		t.Fatalf("delete: %v (%v), want exit status %d", d, err, 128+syscall.SIGKILL)
	}

	// A task left running ends with the server once containerd's
	// directory goes.
	left, err := tc.Create(ctx, &taskapi.CreateTaskRequest{ID: "container1", Bundle: dir})
	if err != nil {
		t.Fatal(err)
	}
	conn2, err := tc.Connect(ctx, &taskapi.ConnectRequest{ID: "container1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Dir(address)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range []uint32{left.Pid, conn2.ShimPid} {
		for syscall.Kill(int(pid), 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still runs after containerd's directory went", pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
