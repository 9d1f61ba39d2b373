package nodeinstall

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/testsystemd"
)

// shortDir is a temporary directory with a short path: unix socket paths
// are limited to 108 bytes.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bni")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestSystemdClient drives the shipped D-Bus client against the test
// supervisor: restart jobs and their results, unknown units, unit
// selection by ActiveState.
func TestSystemdClient(t *testing.T) {
	var starts []string
	failNext := false
	sock := filepath.Join(shortDir(t), "private")
	sup := testsystemd.Start(t, sock,
		testsystemd.Unit{Name: "k3s.service", Start: func() error { starts = append(starts, "k3s"); return nil }, Stop: func() {}},
		testsystemd.Unit{Name: "flaky.service", Start: func() error {
			if failNext {
				return errors.New("exit status 1")
			}
			return nil
		}, Stop: func() {}},
	)
	sd := Systemd{Socket: sock}
	ctx := context.Background()

	for _, tc := range []struct {
		name, unit string
		fail       bool
		wantErr    string
		wantState  string
	}{
		{name: "restart", unit: "k3s.service", wantState: "active"},
		{name: "job fails", unit: "flaky.service", fail: true, wantErr: "job failed", wantState: "failed"},
		{name: "restart after failure", unit: "flaky.service", wantState: "active"},
		{name: "unknown unit", unit: "crio.service", wantErr: "NoSuchUnit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			failNext = tc.fail
			err := sd.Restart(ctx, tc.unit)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Restart(%s) = %v, want error containing %q", tc.unit, err, tc.wantErr)
			}
			if tc.wantState == "" {
				if _, err := sd.ActiveState(ctx, tc.unit); err == nil {
					t.Errorf("ActiveState of unknown %s: no error", tc.unit)
				}
				return
			}
			if st, err := sd.ActiveState(ctx, tc.unit); err != nil || st != tc.wantState {
				t.Errorf("ActiveState(%s) = %q, %v; want %q", tc.unit, st, err, tc.wantState)
			}
		})
	}
	if got := sup.Restarts("k3s.service"); got != 1 || len(starts) != 2 {
		t.Errorf("k3s restarted %d times, started %d times; want 1 and 2", got, len(starts))
	}

	failNext = true
	if err := sd.Restart(ctx, "flaky.service"); err == nil {
		t.Fatal("failing restart: no error")
	}
	for _, tc := range []struct {
		units []string
		want  string
	}{
		{[]string{"k3s-agent.service", "k3s.service"}, "k3s.service"},
		{[]string{"flaky.service", "k3s.service"}, "k3s.service"},
		{[]string{"flaky.service", "crio.service"}, ""},
	} {
		got, err := sd.SelectUnit(ctx, tc.units)
		if got != tc.want || (tc.want == "") != errors.Is(err, ErrNoActiveUnit) {
			t.Errorf("SelectUnit(%v) = %q, %v; want %q", tc.units, got, err, tc.want)
		}
	}

	if err := (Systemd{Socket: filepath.Join(shortDir(t), "none")}).Restart(ctx, "k3s.service"); err == nil || !strings.Contains(err.Error(), "connecting to systemd") {
		t.Errorf("no socket: %v", err)
	}
}
