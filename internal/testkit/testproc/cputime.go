package testproc

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime is the CPU time (user and system) this process has used, not
// counting its children. Benchmarks report it next to wall time: the
// shared CI machine is often overloaded, and wall time then says more
// about the neighbours than about the code, while a child such as the
// test API server is not the code measured.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
