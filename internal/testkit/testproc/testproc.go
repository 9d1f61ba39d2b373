// Package testproc looks at the processes a test started, through /proc,
// so that tests of code that runs and kills child processes can assert
// that none survive. It is imported only by tests.
package testproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MarkerAlive reports whether a process has marker in its command line.
// Tests give their child processes a marker nothing else has, such as an
// odd sleep time, since the children's pids are not known. A zombie has
// no command line left, so it does not count.
func MarkerAlive(t testing.TB, marker string) bool {
	t.Helper()
	return len(Marked(t, marker)) > 0
}

// Marked returns the pids of the processes with marker in their command
// line.
func Marked(t testing.TB, marker string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("listing processes: %v", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// WaitMarker waits up to timeout until a process with marker in its
// command line runs (alive) or none does (!alive), and reports whether
// it came to that.
func WaitMarker(t testing.TB, marker string, alive bool, timeout time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(timeout); MarkerAlive(t, marker) != alive; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// KillMarked kills (SIGKILL) the processes with marker in their command
// line: what a failed test leaves running.
func KillMarked(t testing.TB, marker string) {
	t.Helper()
	for _, pid := range Marked(t, marker) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// WaitGroupGone waits up to timeout until process group pgid has no
// process left, zombies included: killed orphans are reaped by init, which
// may take a moment.
func WaitGroupGone(pgid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := syscall.Kill(-pgid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d survives %s (kill 0: %v)", pgid, timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
