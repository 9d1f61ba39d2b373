//go:build !linux

package discover

import (
	"io/fs"
	"runtime"

	"berth.dev/berth/internal/host/facts"
)

// probeKVM cannot run outside Linux; berth still reads offline roots there.
func probeKVM(func() (int, error), string) facts.KVMProbe {
	return facts.KVMProbe{Error: "KVM probe not supported on " + runtime.GOOS}
}

// accessRW is unknown outside Linux: report false.
func accessRW(string) bool { return false }

// fileOwner is not available outside Linux.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
