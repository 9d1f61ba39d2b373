//go:build berthtest

package cli

import (
	"os"
	"time"
)

// afterOpenRoot holds a berth built with -tags berthtest once the host
// root is open (a snapshot unpacked), so that a test can signal it at a
// known point: with BERTH_TEST_HOLD=FILE it writes the root's path to
// FILE and waits for its context to be cancelled (SIGINT, SIGTERM), or,
// with BERTH_TEST_HOLD_DEAF=1 too, for a minute whatever happens, like a
// command that does not watch its context.
func afterOpenRoot(g *Globals, root string) {
	ready := g.getenv("BERTH_TEST_HOLD")
	if ready == "" {
		return
	}
	if err := os.WriteFile(ready, []byte(root), 0o644); err != nil {
		panic(err)
	}
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	if g.getenv("BERTH_TEST_HOLD_DEAF") != "" {
		<-t.C
		return
	}
	select {
	case <-g.life.context().Done():
	case <-t.C:
	}
}

// testForceAfter lets BERTH_TEST_FORCE_AFTER shorten how long berth waits
// for a command that does not return after a signal.
func testForceAfter(getenv func(string) string, d time.Duration) time.Duration {
	if e, err := time.ParseDuration(getenv("BERTH_TEST_FORCE_AFTER")); err == nil {
		return e
	}
	return d
}
