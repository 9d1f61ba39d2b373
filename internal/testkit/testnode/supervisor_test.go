package testnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fileReady is ready once path holds the running daemon's pid: the
// daemons below write it when they start.
func fileReady(path string, s **Supervisor) func(context.Context) error {
	return func(context.Context) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if got, want := strings.TrimSpace(string(data)), strconv.Itoa((*s).PID()); got != want {
			return fmt.Errorf("ready file names pid %s, want %s", got, want)
		}
		return nil
	}
}

// waitInactive waits (without a deadline of its own: the test's timeout
// bounds it) until the supervisor has seen its daemon exit.
func waitInactive(s *Supervisor) {
	for s.Active() {
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSupervisor(t *testing.T) {
	tests := []struct {
		name string
		// script is the daemon: $1 is its ready file, $2 a file whose
		// creation makes it exit with status 3.
		script string
		steps  func(t *testing.T, s *Supervisor, exitFile string)
	}{
		{
			name:   "restart replaces the process and keeps the log of both runs",
			script: `echo "up $$"; echo $$ > "$1"; exec sleep 600`,
			steps: func(t *testing.T, s *Supervisor, _ string) {
				ctx := context.Background()
				if err := s.Start(ctx); err != nil {
					t.Fatal(err)
				}
				first := s.PID()
				if err := s.Restart(ctx); err != nil {
					t.Fatal(err)
				}
				if s.PID() == first || s.PID() == 0 || s.Starts() != 2 || !s.Active() {
					t.Errorf("after Restart: pid %d (first %d), %d starts, active %v", s.PID(), first, s.Starts(), s.Active())
				}
				if err := syscall.Kill(first, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("the first run (pid %d) still exists: %v", first, err)
				}
				if err := s.Start(ctx); err != nil || s.Starts() != 2 {
					t.Errorf("Start of a running daemon: %v, %d starts; want a no-op", err, s.Starts())
				}
				for _, want := range []string{"=== d: start #1", "=== d: start #2", "up "} {
					if !strings.Contains(s.Log(), want) {
						t.Errorf("log lacks %q:\n%s", want, s.Log())
					}
				}
				if err := s.Stop(ctx); err != nil || s.Active() || s.LastExit() != nil {
					t.Errorf("Stop: %v, active %v, last exit %v; want stopped cleanly", err, s.Active(), s.LastExit())
				}
			},
		},
		{
			name:   "an exit on its own is recorded and a start brings it back",
			script: `echo $$ > "$1"; while [ ! -e "$2" ]; do sleep 0.05; done; exit 3`,
			steps: func(t *testing.T, s *Supervisor, exitFile string) {
				ctx := context.Background()
				if err := s.Start(ctx); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(exitFile, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				waitInactive(s)
				if err := s.LastExit(); err == nil || !strings.Contains(err.Error(), "exit status 3") {
					t.Errorf("LastExit = %v, want exit status 3", err)
				}
				if err := os.Remove(exitFile); err != nil {
					t.Fatal(err)
				}
				if err := s.Start(ctx); err != nil || !s.Active() || s.LastExit() != nil {
					t.Errorf("Start after the exit: %v, active %v, last exit %v", err, s.Active(), s.LastExit())
				}
			},
		},
		{
			name:   "a daemon that dies before it is ready is an error with its status",
			script: `echo "bad config" >&2; exit 2`,
			steps: func(t *testing.T, s *Supervisor, _ string) {
				err := s.Start(context.Background())
				if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "exit status 2") {
					t.Errorf("Start = %v, want an exit before ready with status 2", err)
				}
				if !strings.Contains(s.Log(), "bad config") || s.Active() {
					t.Errorf("active %v, log:\n%s", s.Active(), s.Log())
				}
			},
		},
		{
			name:   "a daemon never ready is stopped when the context ends",
			script: `exec sleep 600`,
			steps: func(t *testing.T, s *Supervisor, _ string) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if err := s.Start(ctx); !errors.Is(err, context.Canceled) || s.Active() {
					t.Errorf("Start = %v, active %v; want context.Canceled and no daemon", err, s.Active())
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ready, exitFile := filepath.Join(dir, "ready"), filepath.Join(dir, "exit")
			var s *Supervisor
			s = NewSupervisor("d", []string{"/bin/sh", "-c", tt.script, "sh", ready, exitFile}, fileReady(ready, &s))
			t.Cleanup(func() { _ = s.Close() })
			tt.steps(t, s, exitFile)
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if err := s.Start(context.Background()); err == nil {
				t.Error("Start after Close succeeded")
			}
		})
	}
}
