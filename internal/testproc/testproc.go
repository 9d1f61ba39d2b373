// Package testproc looks at the processes a test started, through /proc,
// so that tests of code that runs and kills child processes can assert
// that none survive. It is imported only by tests.
package testproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MarkerAlive reports whether a process has marker in its command line.
// Tests give their child processes a marker nothing else has, such as an
// odd sleep time, since the children's pids are not known.
func MarkerAlive(t testing.TB, marker string) bool {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("listing processes: %v", err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), marker) {
			return true
		}
	}
	return false
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
