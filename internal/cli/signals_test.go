package cli

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The tests below run the real berth binary, since what they test (signal
// dispositions, SIGPIPE on stdout, the process exiting) only exists in a
// process of its own. With tags "berthtest" it is built with the test hook
// that holds a command once its root is open (testhook_berthtest.go).
func buildBerth(t *testing.T, tags string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds berth")
	}
	bin := filepath.Join(t.TempDir(), "berth")
	out, err := exec.Command("go", "build", "-tags", tags, "-o", bin, "berth.dev/berth/cmd/berth").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// snapshotOf makes a snapshot of the fixture host with berth itself.
func snapshotOf(t *testing.T, bin string) string {
	t.Helper()
	snap := filepath.Join(t.TempDir(), "host.tar.gz")
	if out, err := exec.Command(bin, "snapshot", "--root", fixtureRoot, "-o", snap).CombinedOutput(); err != nil {
		t.Fatalf("berth snapshot: %v\n%s", err, out)
	}
	return snap
}

// leftovers lists what berth left in its private TMPDIR.
func leftovers(t *testing.T, tmp string) []string {
	t.Helper()
	ents, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// exitOf is the exit code of a finished berth, or -signal when a signal
// killed it.
func exitOf(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	}
	t.Fatal(err)
	return 0
}

// waitFor waits for cmd to exit, at most limit.
func waitFor(t *testing.T, cmd *exec.Cmd, limit time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("berth did not exit within %s", limit)
		return nil
	}
}

// TestSignalRemovesSnapshot holds berth facts on a snapshot once it is
// unpacked (the test hook), signals it and checks that the unpacked
// snapshot is gone when it exits: after the command returns on its
// cancelled context, and, for a command that ignores its context, after a
// second signal or the grace period.
func TestSignalRemovesSnapshot(t *testing.T) {
	bin := buildBerth(t, "berthtest")
	snap := snapshotOf(t, bin)
	for _, tc := range []struct {
		name     string
		sigs     []syscall.Signal
		deaf     bool
		wantCode int
		within   time.Duration
	}{
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}, false, ExitTerminated, 8 * time.Second},
		{"SIGINT", []syscall.Signal{syscall.SIGINT}, false, ExitInterrupted, 8 * time.Second},
		{"SIGTERM to a deaf command, then SIGINT", []syscall.Signal{syscall.SIGTERM, syscall.SIGINT}, true, ExitTerminated, 8 * time.Second},
		{"SIGINT to a deaf command, grace period", []syscall.Signal{syscall.SIGINT}, true, ExitInterrupted, 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			ready := filepath.Join(t.TempDir(), "ready")
			cmd := exec.Command(bin, "facts", "--root", snap)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp, "BERTH_TEST_HOLD=" + ready, "BERTH_TEST_FORCE_AFTER=1s"}
			if tc.deaf {
				cmd.Env = append(cmd.Env, "BERTH_TEST_HOLD_DEAF=1")
			}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, err := os.Stat(ready); err == nil {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("berth never opened the snapshot: %s", stderr.String())
				}
			}
			if l := leftovers(t, tmp); len(l) != 1 || !strings.HasPrefix(l[0], "berth-snapshot-") {
				t.Fatalf("while berth runs, TMPDIR holds %v, want the unpacked snapshot", l)
			}
			start := time.Now()
			for i, s := range tc.sigs {
				if i > 0 {
					time.Sleep(200 * time.Millisecond)
				}
				if err := cmd.Process.Signal(s); err != nil {
					t.Fatal(err)
				}
			}
			code := exitOf(t, waitFor(t, cmd, 10*time.Second))
			took := time.Since(start)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.wantCode, stderr.String())
			}
			if took > tc.within {
				t.Errorf("berth took %s to exit after the signal", took)
			}
			if l := leftovers(t, tmp); len(l) > 0 {
				t.Errorf("berth left %v in TMPDIR", l)
			}
			t.Logf("exit %d after %s", code, took)
		})
	}
}

// TestSignalAnyTime signals the plain berth at random moments of its run
// on a snapshot: whatever it was doing, nothing is left in TMPDIR.
func TestSignalAnyTime(t *testing.T) {
	bin := buildBerth(t, "")
	snap := snapshotOf(t, bin)
	tmp := t.TempDir()
	codes := map[int]int{}
	for i := range 40 {
		cmd := exec.Command(bin, "facts", "--root", snap, "-o", "json")
		cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.IntN(12000)) * time.Microsecond)
		sig := []syscall.Signal{syscall.SIGTERM, syscall.SIGINT}[i%2]
		cmd.Process.Signal(sig)
		code := exitOf(t, waitFor(t, cmd, 10*time.Second))
		codes[code]++
		switch code {
		case 0, ExitTerminated, ExitInterrupted:
		case -int(sig): // before berth set up its handlers: nothing was unpacked yet
		default:
			t.Errorf("run %d: exit %d", i, code)
		}
		if l := leftovers(t, tmp); len(l) > 0 {
			t.Fatalf("run %d (exit %d): berth left %v in TMPDIR", i, code, l)
		}
	}
	t.Logf("exit codes: %v", codes)
}

// TestClosedStdout runs berth with its stdout a pipe nobody reads: Go would
// kill it with SIGPIPE at the first write, before its deferred cleanup.
// berth exits 141, quietly, after removing the unpacked snapshot. Then the
// same through a real `| head -c1`.
func TestClosedStdout(t *testing.T) {
	bin := buildBerth(t, "")
	snap := snapshotOf(t, bin)
	tmp := t.TempDir()
	env := []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp}
	for _, args := range [][]string{
		{"facts", "--root", snap},
		{"facts", "--root", snap, "-o", "json"},
		{"facts", "--root", snap, "-o", "yaml"},
		{"check", "--root", snap},
		{"check", "--root", snap, "-o", "json"},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Env, cmd.Stdout, cmd.Stderr = env, w, &stderr
		err = cmd.Run()
		w.Close()
		if code := exitOf(t, err); code != ExitBrokenPipe || stderr.Len() > 0 {
			t.Errorf("%v with stdout closed: exit %d, stderr %q; want %d and nothing", args, code, stderr.String(), ExitBrokenPipe)
		}
		if l := leftovers(t, tmp); len(l) > 0 {
			t.Fatalf("%v: berth left %v in TMPDIR", args, l)
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash for the pipeline")
	}
	for range 10 {
		pipeline := exec.Command(bash, "-c", `"$0" facts --root "$1" | head -c1 >/dev/null; echo "${PIPESTATUS[0]}"`, bin, snap)
		pipeline.Env = env
		out, err := pipeline.Output()
		if err != nil {
			t.Fatal(err)
		}
		if code := strings.TrimSpace(string(out)); code != "0" && code != "141" {
			t.Errorf("berth facts | head -c1: berth exited %s", code)
		}
	}
	if l := leftovers(t, tmp); len(l) > 0 {
		t.Errorf("berth facts | head -c1 left %v in TMPDIR", l)
	}
}
