package testproc

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMarkerAliveAndGroupGone(t *testing.T) {
	const marker = "9191.0001"
	cmd := exec.Command("sleep", marker)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sleep: %v", err)
	}
	pgid := cmd.Process.Pid
	if !MarkerAlive(t, marker) {
		t.Errorf("MarkerAlive(%q) = false while the sleep runs", marker)
	}
	if err := WaitGroupGone(pgid, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "survives") {
		t.Errorf("WaitGroupGone of a running group = %v, want it to survive", err)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if err := WaitGroupGone(pgid, 2*time.Second); err != nil {
		t.Errorf("WaitGroupGone after kill and wait: %v", err)
	}
	if MarkerAlive(t, marker) {
		t.Errorf("MarkerAlive(%q) = true after the sleep was killed", marker)
	}
}

func TestWaitAndKillMarked(t *testing.T) {
	const marker = "9191.0002"
	cmd := exec.Command("sleep", marker)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sleep: %v", err)
	}
	defer cmd.Wait()
	if !WaitMarker(t, marker, true, 2*time.Second) {
		t.Fatal("WaitMarker(alive) = false while the sleep runs")
	}
	if pids := Marked(t, marker); len(pids) != 1 || pids[0] != cmd.Process.Pid {
		t.Errorf("Marked = %v, want [%d]", pids, cmd.Process.Pid)
	}
	if WaitMarker(t, marker, false, 50*time.Millisecond) {
		t.Error("WaitMarker(gone) = true while the sleep runs")
	}
	KillMarked(t, marker)
	// Until it is reaped the sleep is a zombie, which has no command line.
	if !WaitMarker(t, marker, false, 2*time.Second) {
		t.Error("WaitMarker(gone) = false after KillMarked")
	}
}
