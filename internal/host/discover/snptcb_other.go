//go:build !linux

package discover

import "runtime"

// probeSEV cannot run outside Linux; offline roots still carry the TCB.
func probeSEV(func() (int, error), string) sevProbe {
	return sevProbe{Error: "the /dev/sev probe is not supported on " + runtime.GOOS}
}
