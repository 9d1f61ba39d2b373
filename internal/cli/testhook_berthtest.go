//go:build berthtest

package cli

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"berth.dev/berth/internal/node/configure"
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

// changeOptions gives a berth built with -tags berthtest the fault
// suite's kill points: with BERTH_TEST_STEPS=FILE each step of a runtime
// configuration change is appended to FILE, and with
// BERTH_TEST_KILL_AT=STEP berth SIGKILLs itself at that step, as a power
// cut or the OOM killer would (no deferred cleanup runs).
func changeOptions(g *Globals) []configure.Option {
	steps, kill := g.getenv("BERTH_TEST_STEPS"), g.getenv("BERTH_TEST_KILL_AT")
	if steps == "" && kill == "" {
		return nil
	}
	return []configure.Option{configure.WithStep(func(s string) {
		if steps != "" {
			if f, err := os.OpenFile(steps, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
				fmt.Fprintln(f, s)
				f.Close()
			}
		}
		if s == kill {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute)
		}
	})}
}
