package main

import (
	"os"
	"testing"
)

func TestUpgraded(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"replaces both", "NAME=\"Debian\"\nVERSION_ID=\"12\"\nPRETTY_NAME=\"Debian 12\"\nID=debian\n",
			"NAME=\"Debian\"\nID=debian\nVERSION_ID=\"3.bench\"\nPRETTY_NAME=\"bench OS 3.bench\"\n"},
		{"adds missing", "ID=debian\n", "ID=debian\nVERSION_ID=\"3.bench\"\nPRETTY_NAME=\"bench OS 3.bench\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(upgraded([]byte(tt.in), "3.bench")); got != tt.want {
				t.Errorf("upgraded:\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestProgram(t *testing.T) {
	tests := []struct{ agent, want string }{
		{"berth/dev", "berth-agent"},
		{"nfd-worker/v0.0.0 (linux/amd64) kubernetes/$Format", "nfd-worker"},
		{"kube-apiserver/v1.37.2 (linux/amd64) kubernetes/abc", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := program(tt.agent); got != tt.want {
			t.Errorf("program(%q) = %q, want %q", tt.agent, got, tt.want)
		}
	}
}

// TestProcReaders reads this test process's own /proc entries: its CPU
// time and RSS are positive, and a missing process is an error.
func TestProcReaders(t *testing.T) {
	pid := os.Getpid()
	// Work until the clock-tick counter moves (10 ms of CPU), within a
	// bound that only a broken reader reaches.
	var ticks int64
	var err error
	x := 0
	for round := 0; round < 1000 && err == nil && ticks == 0; round++ {
		for i := range 1_000_000 {
			x += i
		}
		ticks, err = cpuTicks(pid)
	}
	if err != nil || ticks <= 0 {
		t.Errorf("cpuTicks(self) = %d, %v (x=%d); want > 0", ticks, err, x)
	}
	if kb, err := status(pid, "VmRSS"); err != nil || kb <= 0 {
		t.Errorf("status(self, VmRSS) = %d, %v; want > 0", kb, err)
	}
	if _, err := status(pid, "NoSuchKey"); err == nil {
		t.Error("status(self, NoSuchKey): no error")
	}
	if _, err := cpuTicks(1 << 30); err == nil {
		t.Error("cpuTicks of a pid that does not exist: no error")
	}
}
