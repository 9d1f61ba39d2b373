package hostfs

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit/testproc"
)

// TestRunChildDiesWithBerth: a command Live.Run started (a binary's
// --version) is killed when berth dies, even by SIGKILL, so that a read
// that does not subscribe to signals leaves nothing running. The test
// binary runs itself as "berth": that copy starts a long child, marked by
// its odd sleep time, and is killed while it waits.
func TestRunChildDiesWithBerth(t *testing.T) {
	const marker = "4242.0011"
	if os.Getenv("BERTH_TEST_RUN_CHILD") != "" {
		l, err := NewLive("/")
		if err != nil {
			os.Exit(3)
		}
		l.Timeout = time.Minute
		l.Run(context.Background(), "/bin/sh", "-c", "exec sleep "+marker)
		os.Exit(0)
	}
	defer testproc.KillMarked(t, marker)
	berth := exec.Command(os.Args[0], "-test.run=^TestRunChildDiesWithBerth$")
	berth.Env = append(os.Environ(), "BERTH_TEST_RUN_CHILD=1")
	if err := berth.Start(); err != nil {
		t.Fatal(err)
	}
	if !testproc.WaitMarker(t, marker, true, 10*time.Second) {
		berth.Process.Kill()
		t.Fatal("the child did not start")
	}
	berth.Process.Kill()
	berth.Wait()
	if !testproc.WaitMarker(t, marker, false, 5*time.Second) {
		t.Fatal("the child outlived berth by 5 s")
	}
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
