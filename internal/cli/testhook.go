//go:build !berthtest

package cli

import (
	"time"

	"berth.dev/berth/internal/node/configure"
)

// afterOpenRoot is a test hook (build tag berthtest): the real binary
// does nothing here.
func afterOpenRoot(*Globals, string) {}

// testForceAfter is a test hook (build tag berthtest): the real binary
// waits as its wiring says.
func testForceAfter(_ func(string) string, d time.Duration) time.Duration { return d }

// changeOptions is a test hook (build tag berthtest): the real binary
// passes no options to a runtime configuration change.
func changeOptions(*Globals) []configure.Option { return nil }
