// Package runtimectl restarts a node's container runtime through its
// systemd unit and proves the restart over CRI: the one implementation
// behind `berth config apply|remove --restart`, `berth install --restart`
// and the node-installer. How the unit is reached is a mechanism (Units):
// the host's systemctl on a host berth runs on, or systemd's D-Bus API on
// its private socket from the node-installer's container (package
// systemdbus, kept apart so that berth links no D-Bus client). How the
// runtime is asked is a function (Ask): over the CRI socket in
// berth-cluster (cri.Ask), through berth verify in berth, which links no
// gRPC. Commands, clocks and sockets are values passed in: the package
// holds no state of its own.
package runtimectl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// Runner runs a host command, as hostfs.Root's Run does: argv[0] is an
// absolute path on the host, a non-zero exit is an answer and not an
// error.
type Runner func(ctx context.Context, argv ...string) (hostfs.CommandResult, error)

// Units is a way to reach systemd: the host's systemctl (Systemctl) or
// systemd's D-Bus API (systemdbus.Systemd).
type Units interface {
	// State returns the unit's ActiveState ("active", "inactive",
	// "failed", ...); an error when systemd cannot be asked or does not
	// know the unit.
	State(ctx context.Context, unit string) (string, error)
	// Restart restarts the unit as `systemctl restart` does and returns
	// once the restart job finished; a job that did not succeed is an
	// error.
	Restart(ctx context.Context, unit string) error
}

// Services is the part of a mechanism that installs a service berth
// ships with a platform (nydus-snapshotter's unit): Systemctl and
// systemdbus.Systemd have it.
type Services interface {
	// Reload makes systemd read its unit files again (daemon-reload).
	Reload(ctx context.Context) error
	// Enable enables the unit (its [Install] section's links); Disable
	// removes them.
	Enable(ctx context.Context, unit string) error
	Disable(ctx context.Context, unit string) error
	// Start and Stop start and stop the unit as `systemctl start|stop`
	// do and return once the job finished; a job that did not succeed is
	// an error.
	Start(ctx context.Context, unit string) error
	Stop(ctx context.Context, unit string) error
}

// Status is what the runtime answered: the handlers it loaded and, when
// the asker can tell, its name and version ("containerd", "v2.4.2").
type Status struct {
	Name, Version string
	Handlers      []string
}

// Ask asks the runtime once which handlers it has; an error when it does
// not answer.
type Ask func(ctx context.Context) (Status, error)

// ErrNoActiveUnit is returned by SelectUnit (and Finder.Find) when none of
// the candidate units runs.
var ErrNoActiveUnit = errors.New("none of the runtime's units is active")

// SelectUnit returns the first of units that systemd reports active: a
// distribution names several (k3s or k3s-agent) and the node runs one.
func SelectUnit(ctx context.Context, sd Units, units []string) (string, error) {
	var why []string
	for _, u := range units {
		st, err := sd.State(ctx, u)
		if err == nil && st == "active" {
			return u, nil
		}
		if err != nil {
			why = append(why, err.Error())
		} else {
			why = append(why, u+" is "+st)
		}
	}
	return "", fmt.Errorf("%w: %v", ErrNoActiveUnit, why)
}

// Runtime is a node's container runtime as configure.ApplyLive drives
// it: a systemd unit restarted through Units, proven over CRI through Ask,
// its log read through Journal when the restart broke it.
type Runtime struct {
	// Units reaches systemd.
	Units Units
	// Unit is the runtime's systemd unit (containerd.service).
	Unit string
	// Ask asks the runtime which handlers it loaded.
	Ask Ask
	// Journal, when set, returns the unit's recent log.
	Journal func(ctx context.Context, unit string) string
	// Snapshotter, when set, proves that the runtime has a snapshotter
	// loaded and that it answers (cri.ProveSnapshotter): the live proof
	// of a nydus platform's proxy plugin.
	Snapshotter func(ctx context.Context, name string) error
	// Wait bounds how long Handlers waits for the runtime to answer
	// after a restart; zero means a minute (containerd loads its plugins
	// before its socket answers).
	Wait time.Duration
	// Poll is the pause between two questions; zero means 250 ms.
	Poll time.Duration
	// Now is the clock of Wait; nil is time.Now.
	Now func() time.Time
	// Config, when set, loads the runtime's configuration as the
	// runtime parses it before every restart (configure.ConfigLoader).
	Config *ContainerdConfig
}

var (
	_ configure.Runtime      = Runtime{}
	_ configure.Services     = Runtime{}
	_ configure.ConfigLoader = Runtime{}
)

// Name is the unit: what a user restarts by hand.
func (r Runtime) Name() string { return r.Unit }

// Restart restarts the unit and waits for its job.
func (r Runtime) Restart(ctx context.Context) error { return r.Units.Restart(ctx, r.Unit) }

// Handlers waits until the runtime answers and returns its handlers: a
// unit whose job is done may still be loading its plugins, so the first
// questions may go unanswered.
func (r Runtime) Handlers(ctx context.Context) ([]string, error) {
	wait, poll, now := r.Wait, r.Poll, r.Now
	if wait <= 0 {
		wait = time.Minute
	}
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	if now == nil {
		now = time.Now
	}
	deadline := now().Add(wait)
	for {
		st, err := r.Ask(ctx)
		if err == nil {
			return st.Handlers, nil
		}
		if now().After(deadline) {
			return nil, err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last answer: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Running returns the name and version of the runtime that answers now,
// which need not be the binary discovery found on the PATH.
func (r Runtime) Running(ctx context.Context) (name, version string, err error) {
	st, err := r.Ask(ctx)
	if err != nil {
		return "", "", err
	}
	return st.Name, st.Version, nil
}

// Log returns the unit's recent problem lines, when there is a journal:
// the reason a restart broke the runtime is there, not in the job's
// result.
func (r Runtime) Log(ctx context.Context) string {
	if r.Journal == nil {
		return ""
	}
	return configure.ProblemLines(r.Journal(ctx, r.Unit), 10)
}

// services is r.Units' Services, or an error saying it has none.
func (r Runtime) services() (Services, error) {
	sv, ok := r.Units.(Services)
	if !ok {
		return nil, fmt.Errorf("%T cannot enable or start units", r.Units)
	}
	return sv, nil
}

// StartServices reloads systemd's unit files, then enables and starts
// each unit (restarts it when restart), and checks that it is active:
// a service of Type=simple is "active" once forked, so a binary that
// exits at once is caught by asking again after a moment (Poll).
func (r Runtime) StartServices(ctx context.Context, units []string, restart bool) error {
	sv, err := r.services()
	if err != nil {
		return err
	}
	if err := sv.Reload(ctx); err != nil {
		return err
	}
	for _, u := range units {
		if err := sv.Enable(ctx, u); err != nil {
			return err
		}
		start := sv.Start
		if restart {
			start = r.Units.Restart
		}
		if err := start(ctx, u); err != nil {
			return err
		}
	}
	poll := r.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	t := time.NewTimer(4 * poll)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	for _, u := range units {
		st, err := r.Units.State(ctx, u)
		if err != nil {
			return err
		}
		if st != "active" {
			return fmt.Errorf("%s is %s after its start", u, st)
		}
	}
	return nil
}

// StopServices stops and disables each unit, then reloads systemd's unit
// files; every unit is tried and the errors joined.
func (r Runtime) StopServices(ctx context.Context, units []string) error {
	sv, err := r.services()
	if err != nil {
		return err
	}
	var errs []error
	for _, u := range units {
		errs = append(errs, sv.Stop(ctx, u), sv.Disable(ctx, u))
	}
	errs = append(errs, sv.Reload(ctx))
	return errors.Join(errs...)
}

// ServiceActive reports whether systemd reports unit active.
func (r Runtime) ServiceActive(ctx context.Context, unit string) bool {
	st, err := r.Units.State(ctx, unit)
	return err == nil && st == "active"
}

// ServiceLog is unit's journal, "" without one.
func (r Runtime) ServiceLog(ctx context.Context, unit string) string {
	if r.Journal == nil {
		return ""
	}
	return r.Journal(ctx, unit)
}

// ProveSnapshotter proves name through Snapshotter, retrying for a few
// seconds (a proxy plugin's service may still be binding its socket);
// nil when there is no Snapshotter to ask.
func (r Runtime) ProveSnapshotter(ctx context.Context, name string) error {
	if r.Snapshotter == nil {
		return nil
	}
	poll, now := r.Poll, r.Now
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	if now == nil {
		now = time.Now
	}
	deadline := now().Add(10 * time.Second)
	for {
		err := r.Snapshotter(ctx, name)
		if err == nil || now().After(deadline) {
			return err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last answer: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Finder finds the running container runtime of a runtime layout.
type Finder struct {
	// Units reaches systemd.
	Units Units
	// Ask returns how the runtime of a layout is asked (its CRI socket).
	Ask func(l platform.Layout) Ask
	// Snapshotter returns how the runtime of a layout proves a
	// snapshotter; nil proves none.
	Snapshotter func(l platform.Layout) func(ctx context.Context, name string) error
	// Journal, Wait, Poll and Now are those of the Runtime returned.
	Journal func(ctx context.Context, unit string) string
	Wait    time.Duration
	Poll    time.Duration
	Now     func() time.Time
	// Config returns the configuration check of a layout's runtime (nil:
	// none).
	Config func(l platform.Layout) *ContainerdConfig
}

// Find returns the runtime of l: the first of its units that is active
// (ErrNoActiveUnit when none is), asked as f.Ask says.
func (f Finder) Find(ctx context.Context, l platform.Layout) (configure.Runtime, error) {
	unit, err := SelectUnit(ctx, f.Units, l.Units)
	if err != nil {
		return nil, err
	}
	rt := Runtime{Units: f.Units, Unit: unit, Ask: f.Ask(l), Journal: f.Journal, Wait: f.Wait, Poll: f.Poll, Now: f.Now}
	if f.Snapshotter != nil {
		rt.Snapshotter = f.Snapshotter(l)
	}
	if f.Config != nil {
		rt.Config = f.Config(l)
	}
	return rt, nil
}
