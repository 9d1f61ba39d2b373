//go:build !linux

package discover

import (
	"os"
	"runtime"
)

// probeBAR0 cannot run outside Linux; offline roots still carry the modes.
func probeBAR0(func() (*os.File, error), string, []uint32) bar0Device {
	return bar0Device{Error: "reading BAR0 is not supported on " + runtime.GOOS}
}
