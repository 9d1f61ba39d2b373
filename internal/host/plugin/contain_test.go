package plugin

import (
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
	"unsafe"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/testkit/testproc"
)

// doubleFork is a plug-in body that double-forks a daemon the way
// daemon(3) and `setsid cmd &` do: the background shell starts a new
// session, starts the sleep (which inherits the plug-in's stdout and
// holds it open) and exits, so the sleep is an orphan in another session
// and process group than the plug-in. The shell writes the sleep's pid to
// pidFile, to prove it ran.
func doubleFork(marker, pidFile string) string {
	return "setsid sh -c 'sleep " + marker + " & echo $! > " + pidFile + "' &\nwait\n"
}

// runOne runs a checks directory holding one plug-in with body.
func runOne(t *testing.T, body string, opt Options) (Result, time.Duration) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "checks.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(dir, "10-daemon"), body, 0o755)
	start := time.Now()
	res, err := RunChecks(context.Background(), dir, opt)
	took := time.Since(start)
	if err != nil || len(res) != 1 {
		t.Fatalf("RunChecks: %v %+v", err, res)
	}
	return res[0], took
}

// TestRunChecksDoubleFork proves that a plug-in that double-forks into a
// new session with setsid, leaving a process that holds its stdout open,
// leaves nothing running once RunChecks returns, and that RunChecks
// returns when the plug-in exits (or at its timeout), not when the
// grandchild would: with a cgroup (the default where cgroup v2 is
// writable) and with the subreaper (forced).
func TestRunChecksDoubleFork(t *testing.T) {
	// Usable means a cgroup can be made here, not only found: in a
	// container the hierarchy is often mounted read-only.
	cg, cgErr := newCgroup("")
	if cgErr != nil {
		t.Logf("no usable cgroup v2 here (%v): the default is the subreaper", cgErr)
	} else {
		t.Logf("cgroup v2: checks run in cgroups like %s", cg.dir)
		cg.remove()
	}
	for i, tc := range []struct {
		name   string
		iso    Isolation
		want   Isolation
		freeze bool
	}{
		{"default", IsolateAuto, map[bool]Isolation{true: IsolateCgroup, false: IsolateSubreaper}[cgErr == nil], false},
		{"cgroup without cgroup.kill", IsolateCgroup, IsolateCgroup, true},
		{"subreaper", IsolateSubreaper, IsolateSubreaper, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			killFile := ""
			if tc.freeze {
				if cgErr != nil {
					t.Skip("no cgroup v2")
				}
				// As on kernels before 5.14: freeze, kill each member.
				killFile = "cgroup.kill-absent"
			}
			tmp := t.TempDir()
			// The plug-in exits at once with its output; the daemon holds
			// stdout open and would sleep for two hours.
			marker := "7778.1" + strconv.Itoa(i) + "1"
			pidFile := filepath.Join(tmp, "exits.pid")
			r, took := runOne(t, doubleFork(marker, pidFile)+`echo '{"schemaVersion":1,"findings":[{"id":"site.daemon.ok","status":"pass","title":"daemon started"}]}'`,
				Options{Timeout: time.Minute, Isolation: tc.iso, cgroupKillFile: killFile})
			checkNothingLeft(t, r, marker, pidFile, tc.want)
			if r.Err != nil || len(r.Output.Findings) != 1 {
				t.Errorf("exiting plug-in: err=%v output=%+v", r.Err, r.Output)
			}
			if took > 30*time.Second {
				t.Errorf("exiting plug-in took %s: berth waited for the daemon holding stdout (timeout 1m)", took)
			}
			t.Logf("plug-in that exits: RunChecks returned after %s (%s)", took, r.Isolation)

			// The plug-in hangs past its timeout after the double fork.
			marker = "7778.1" + strconv.Itoa(i) + "2"
			pidFile = filepath.Join(tmp, "hangs.pid")
			r, took = runOne(t, doubleFork(marker, pidFile)+"sleep "+marker+"9", Options{Timeout: time.Second, Isolation: tc.iso})
			checkNothingLeft(t, r, marker, pidFile, tc.want)
			if r.Err == nil || !strings.Contains(r.Err.Error(), "timed out after 1s") {
				t.Errorf("hanging plug-in: err=%v, want the timeout", r.Err)
			}
			if took < time.Second || took > 30*time.Second {
				t.Errorf("hanging plug-in took %s, want the 1s timeout, not the daemon's two hours", took)
			}
			t.Logf("plug-in that hangs: RunChecks returned after %s (%s)", took, r.Isolation)
		})
	}
	var on int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&on)), 0, 0, 0); err != nil || on != 1 {
		t.Errorf("berth is not a child subreaper after a forced subreaper run (%d, %v)", on, err)
	}
}

// checkNothingLeft asserts that the daemon of r ran, that no process with
// marker is left, that r's group is gone, that r used isolation want and
// that its cgroup was removed.
func checkNothingLeft(t *testing.T, r Result, marker, pidFile string, want Isolation) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Errorf("the daemon never started: %v", err)
	}
	if testproc.MarkerAlive(t, marker) {
		t.Errorf("a process of the plug-in (sleep %s, pid %s) survived RunChecks", marker, strings.TrimSpace(string(b)))
	}
	if r.Isolation != want {
		t.Errorf("isolation %q, want %q", r.Isolation, want)
	}
	groupGone(t, r.Name, r.PGID)
	if base, err := cgroupBase(); err == nil {
		left, _ := filepath.Glob(filepath.Join(base, "berth-check-"+strconv.Itoa(os.Getpid())+"-*"))
		if len(left) > 0 {
			t.Errorf("cgroups left behind: %v", left)
		}
	}
}

// TestSubreaperLeavesOtherChildren runs berth's other kinds of children
// (one in berth's process group, one in a group of its own like the QEMU
// probe) while plug-ins run with the subreaper: the sweeps must neither
// kill nor reap them, so that their exec.Cmd.Wait sees their real exit.
func TestSubreaperLeavesOtherChildren(t *testing.T) {
	var others []*exec.Cmd
	for _, group := range []bool{false, true} {
		c := exec.Command("sh", "-c", "sleep 1.5; exit 7")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: group}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		others = append(others, c)
	}
	for range 3 {
		r, _ := runOne(t, doubleFork("7778.301", filepath.Join(t.TempDir(), "pid"))+`echo '{"schemaVersion":1}'`,
			Options{Timeout: time.Minute, Isolation: IsolateSubreaper})
		if r.Err != nil {
			t.Errorf("plug-in: %v", r.Err)
		}
	}
	for i, c := range others {
		err := c.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Errorf("berth's child %d: Wait = %v, want exit status 7", i, err)
		}
	}
	if testproc.MarkerAlive(t, "7778.301") {
		t.Errorf("a daemon survived")
	}
}
