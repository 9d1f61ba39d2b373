package hostfs

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunChildDiesWithBerth: a command Live.Run started (a binary's
// --version) is killed when berth dies, even by SIGKILL, so that a read
// that does not subscribe to signals leaves nothing running. The test
// binary runs itself as "berth": that copy starts a long child, and is
// killed while it waits.
func TestRunChildDiesWithBerth(t *testing.T) {
	if pidfile := os.Getenv("BERTH_TEST_RUN_CHILD"); pidfile != "" {
		l, err := NewLive("/")
		if err != nil {
			os.Exit(3)
		}
		l.Timeout = time.Minute
		l.Run(context.Background(), "/bin/sh", "-c", `echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec sleep 60`, pidfile)
		os.Exit(0)
	}
	pidfile := filepath.Join(t.TempDir(), "child.pid")
	berth := exec.Command(os.Args[0], "-test.run=^TestRunChildDiesWithBerth$")
	berth.Env = append(os.Environ(), "BERTH_TEST_RUN_CHILD="+pidfile)
	if err := berth.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
		} else if time.Now().After(deadline) {
			berth.Process.Kill()
			t.Fatalf("the child did not start: %v", err)
		}
	}
	berth.Process.Kill()
	berth.Wait()
	for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the child %d outlived berth by 5 s", pid)
		}
	}
}

// alive reports whether pid runs (a zombie waiting for its new parent to
// reap it does not).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestOpenUnpacking: beforeUnpack runs for a snapshot only, before
// anything is created, and its error stops the opening.
func TestOpenUnpacking(t *testing.T) {
	dir := t.TempDir()
	snap := writeTarGz(t, []tarEntry{{name: "proc/cmdline", typ: tar.TypeReg, data: "ro\n"}})
	stop := errors.New("stopped")
	for _, tc := range []struct {
		name, path string
		ret        error
		wantCalled bool
		wantErr    error
	}{
		{"live", "/", nil, false, nil},
		{"directory", dir, nil, false, nil},
		{"snapshot", snap, nil, true, nil},
		{"snapshot, refused", snap, stop, true, stop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			called := false
			root, cleanup, err := OpenUnpacking(tc.path, false, func() error {
				called = true
				if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
					t.Errorf("%d files created before beforeUnpack", len(ents))
				}
				return tc.ret
			})
			defer cleanup()
			if called != tc.wantCalled || !errors.Is(err, tc.wantErr) || (err == nil) != (root != nil) {
				t.Fatalf("called %v (want %v), error %v (want %v)", called, tc.wantCalled, err, tc.wantErr)
			}
			if tc.wantErr != nil {
				if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
					t.Errorf("a refused opening left %d files", len(ents))
				}
			}
		})
	}
}
