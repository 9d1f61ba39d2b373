package runtimectl_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/node/runtimectl/systemdbus"
	"berth.dev/berth/internal/testkit/testsystemd"
)

// started is a mechanism serving a test's units.
type started struct {
	units    runtimectl.Units
	journal  func(ctx context.Context, unit string) string
	restarts func(unit string) int
	// calls are the commands run, for the systemctl mechanism.
	calls func() [][]string
	// enabled and state are what the supervisor holds of a unit.
	enabled func(unit string) bool
	state   func(unit string) string
}

// mechanism is one way to reach systemd, and what it says where the two
// differ.
type mechanism struct {
	name  string
	start func(t *testing.T, units ...testsystemd.Unit) started
	// broken is the mechanism when systemd cannot be reached, and
	// unreachable what its error says.
	broken      func(t *testing.T) runtimectl.Units
	unreachable string
	// jobFailed and unknown are what a failed restart job and a restart
	// of a unit systemd does not know say.
	jobFailed, unknown string
	// unknownState is the state of an unknown unit ("": an error).
	unknownState string
}

// host is the live root the systemctl mechanism runs its commands on:
// the stand-ins live in the test's temporary directory, on this machine.
func host(t *testing.T) runtimectl.Runner {
	t.Helper()
	live, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	return runtimectl.OnHost(live, time.Minute)
}

var mechanisms = []mechanism{
	{
		name: "systemctl",
		start: func(t *testing.T, units ...testsystemd.Unit) started {
			sc := testsystemd.StartSystemctl(t, t.TempDir(), units...)
			run := host(t)
			return started{
				units:    runtimectl.Systemctl{Run: run, Path: sc.Path("systemctl")},
				journal:  runtimectl.Journal{Run: run, Path: sc.Path("journalctl")}.Log,
				restarts: sc.Restarts,
				calls:    sc.Calls,
				enabled:  sc.Enabled,
				state:    sc.State,
			}
		},
		broken: func(t *testing.T) runtimectl.Units {
			return runtimectl.Systemctl{Run: host(t), Path: filepath.Join(t.TempDir(), "systemctl")}
		},
		unreachable:  "systemctl restart k3s.service",
		jobFailed:    "exit 1: Job for flaky.service failed",
		unknown:      "Unit crio.service not found",
		unknownState: "inactive",
	},
	{
		name: "D-Bus",
		start: func(t *testing.T, units ...testsystemd.Unit) started {
			sock := filepath.Join(testsystemd.ShortDir(t), "private")
			sup := testsystemd.Start(t, sock, units...)
			return started{units: systemdbus.Systemd{Socket: sock}, restarts: sup.Restarts, enabled: sup.Enabled, state: sup.State}
		},
		broken: func(t *testing.T) runtimectl.Units {
			return systemdbus.Systemd{Socket: filepath.Join(testsystemd.ShortDir(t), "none")}
		},
		unreachable: "connecting to systemd",
		jobFailed:   "job failed",
		unknown:     "NoSuchUnit",
	},
	{
		// The node-installer's: the private socket inside the host's
		// root, reached through a link there as a chroot resolves it.
		name: "D-Bus in a root",
		start: func(t *testing.T, units ...testsystemd.Unit) started {
			root := testsystemd.ShortDir(t)
			if err := os.MkdirAll(filepath.Join(root, "run/systemd"), 0o755); err != nil {
				t.Fatal(err)
			}
			sup := testsystemd.Start(t, filepath.Join(root, "p"), units...)
			if err := os.Symlink("/p", filepath.Join(root, "run/systemd/private")); err != nil {
				t.Fatal(err)
			}
			return started{units: systemdbus.Systemd{Root: root, Socket: "/" + systemdbus.PrivateSocket}, restarts: sup.Restarts, enabled: sup.Enabled, state: sup.State}
		},
		broken: func(t *testing.T) runtimectl.Units {
			return systemdbus.Systemd{Root: testsystemd.ShortDir(t), Socket: "/" + systemdbus.PrivateSocket}
		},
		unreachable: "connecting to systemd",
		jobFailed:   "job failed",
		unknown:     "NoSuchUnit",
	},
}

// TestUnits drives both mechanisms against the test's units: restart jobs
// and their results, unknown units, unit selection by ActiveState, and a
// systemd that cannot be reached.
func TestUnits(t *testing.T) {
	for _, m := range mechanisms {
		t.Run(m.name, func(t *testing.T) {
			var starts []string
			failNext := false
			s := m.start(t,
				testsystemd.Unit{Name: "k3s.service", Start: func() error { starts = append(starts, "k3s"); return nil }, Stop: func() {}},
				testsystemd.Unit{Name: "flaky.service", Start: func() error {
					if failNext {
						return errors.New("exit status 1")
					}
					return nil
				}, Stop: func() {}},
			)
			sd := s.units
			ctx := context.Background()
			for _, tc := range []struct {
				name, unit string
				fail       bool
				wantErr    string
				wantState  string
			}{
				{name: "restart", unit: "k3s.service", wantState: "active"},
				{name: "job fails", unit: "flaky.service", fail: true, wantErr: m.jobFailed, wantState: "failed"},
				{name: "restart after failure", unit: "flaky.service", wantState: "active"},
				{name: "unknown unit", unit: "crio.service", wantErr: m.unknown, wantState: m.unknownState},
			} {
				t.Run(tc.name, func(t *testing.T) {
					failNext = tc.fail
					err := sd.Restart(ctx, tc.unit)
					if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
						t.Fatalf("Restart(%s) = %v, want error containing %q", tc.unit, err, tc.wantErr)
					}
					if tc.wantState == "" {
						if _, err := sd.State(ctx, tc.unit); err == nil {
							t.Errorf("State of unknown %s: no error", tc.unit)
						}
						return
					}
					if st, err := sd.State(ctx, tc.unit); err != nil || st != tc.wantState {
						t.Errorf("State(%s) = %q, %v; want %q", tc.unit, st, err, tc.wantState)
					}
				})
			}
			if got := s.restarts("k3s.service"); got != 1 || len(starts) != 2 {
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
				got, err := runtimectl.SelectUnit(ctx, sd, tc.units)
				if got != tc.want || (tc.want == "") != errors.Is(err, runtimectl.ErrNoActiveUnit) {
					t.Errorf("SelectUnit(%v) = %q, %v; want %q", tc.units, got, err, tc.want)
				}
			}

			if err := m.broken(t).Restart(ctx, "k3s.service"); err == nil || !strings.Contains(err.Error(), m.unreachable) {
				t.Errorf("systemd unreachable: %v, want an error containing %q", err, m.unreachable)
			}
		})
	}
}

// TestSystemctlCommands: the commands the systemctl mechanism runs are
// those a user would type, and the journal it reads is the unit's.
func TestSystemctlCommands(t *testing.T) {
	sc := testsystemd.StartSystemctl(t, t.TempDir(),
		testsystemd.Unit{Name: "containerd.service", Start: func() error { return nil }, Stop: func() {},
			Log: func() string { return "level=info msg=starting\nlevel=error msg=\"failed to load plugin\"\n" }})
	run := host(t)
	rt := runtimectl.Runtime{
		Units:   runtimectl.Systemctl{Run: run, Path: sc.Path("systemctl")},
		Unit:    "containerd.service",
		Journal: runtimectl.Journal{Run: run, Path: sc.Path("journalctl")}.Log,
	}
	ctx := context.Background()
	if st, err := rt.Units.State(ctx, rt.Unit); err != nil || st != "active" {
		t.Fatalf("State = %q, %v", st, err)
	}
	if err := rt.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rt.Log(ctx); got != `level=error msg="failed to load plugin"` {
		t.Errorf("Log = %q, want the problem line only", got)
	}
	want := []string{
		"systemctl is-active containerd.service",
		"systemctl restart containerd.service",
		"journalctl -u containerd.service --since -2min --no-pager -o cat",
	}
	var got []string
	for _, c := range sc.Calls() {
		got = append(got, strings.Join(c, " "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands run:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if (runtimectl.Journal{}).Log(ctx, "containerd.service") != "" || (runtimectl.Runtime{}).Log(ctx) != "" {
		t.Error("no journal: a log")
	}
}

// TestHandlersWaits: Handlers asks again until the runtime answers, and
// gives up with the last answer once Wait has passed or the context ends.
func TestHandlersWaits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		wait     time.Duration
		cancel   bool
		want     string
	}{
		{name: "answers at once", want: "kata-qemu,runc"},
		{name: "answers on the third question", failures: 2, wait: time.Minute, want: "kata-qemu,runc"},
		{name: "never within the wait", failures: 1000, wait: 50 * time.Millisecond, want: "error: connection refused"},
		{name: "context ends", failures: 1000, wait: time.Minute, cancel: true, want: "error: context canceled (last answer: connection refused)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rt := runtimectl.Runtime{Unit: "containerd.service", Wait: tc.wait, Poll: time.Millisecond,
				Ask: func(context.Context) (runtimectl.Status, error) {
					asked++
					if tc.cancel && asked == 3 {
						cancel()
					}
					if asked <= tc.failures {
						return runtimectl.Status{}, errors.New("connection refused")
					}
					return runtimectl.Status{Name: "containerd", Version: "v2.4.2", Handlers: []string{"kata-qemu", "runc"}}, nil
				}}
			hs, err := rt.Handlers(ctx)
			got := strings.Join(hs, ",")
			if err != nil {
				got = "error: " + err.Error()
			}
			if got != tc.want {
				t.Errorf("Handlers = %s, want %s", got, tc.want)
			}
			if tc.failures < 1000 && asked != tc.failures+1 {
				t.Errorf("asked %d times, want %d", asked, tc.failures+1)
			}
		})
	}
	rt := runtimectl.Runtime{Ask: func(context.Context) (runtimectl.Status, error) {
		return runtimectl.Status{Name: "containerd", Version: "v2.4.2"}, nil
	}}
	if name, version, err := rt.Running(context.Background()); name != "containerd" || version != "v2.4.2" || err != nil {
		t.Errorf("Running = %s %s %v", name, version, err)
	}
}
