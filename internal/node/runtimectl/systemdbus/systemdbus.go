// Package systemdbus reaches systemd through its D-Bus API on its private
// socket: runtimectl's mechanism where systemctl cannot run (the
// node-installer's container). It is apart from runtimectl so that berth,
// which restarts through systemctl, links no D-Bus client.
package systemdbus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/runtimectl"
)

// The systemd D-Bus names used (org.freedesktop.systemd1(5)).
const (
	systemdDest      = "org.freedesktop.systemd1"
	systemdPath      = dbus.ObjectPath("/org/freedesktop/systemd1")
	managerInterface = "org.freedesktop.systemd1.Manager"
	unitInterface    = "org.freedesktop.systemd1.Unit"
	// PrivateSocket is systemd's private socket, relative to the host
	// root: a peer-to-peer D-Bus connection straight to PID 1, which needs
	// no bus daemon and accepts root (EXTERNAL authentication).
	PrivateSocket = "run/systemd/private"
)

// Systemd talks to the host's systemd over its private D-Bus socket. The
// node-installer runs in a container with the host's / at /host, so it
// cannot run the host's systemctl (systemctl refuses to act in a chroot)
// and should not enter the host's namespaces (no hostPID, no nsenter):
// the socket is a file on the host's file system, and systemd's Manager
// API on it is what systemctl itself uses.
type Systemd struct {
	// Socket is the path of the private socket on this machine
	// (/host/run/systemd/private in the DaemonSet).
	Socket string
	// Root, when set, is the host root Socket is a path in: the socket
	// is resolved there as a process chrooted into Root would
	// (hostfs.DialUnix), so that a link in the host's /run never makes
	// berth restart units of a systemd outside it.
	Root string
	// JobTimeout bounds how long Restart waits for the restart job; zero
	// means 3 minutes (systemd's default start timeout is 90 s, twice
	// over for the stop and the start).
	JobTimeout time.Duration
}

// dial opens one connection: systemd's private socket speaks D-Bus
// without a bus daemon, so there is no Hello and no match rule to add
// (systemd sends its signals to every private connection).
func (s Systemd) dial(ctx context.Context) (*dbus.Conn, error) {
	where := s.Socket
	var conn *dbus.Conn
	var err error
	if s.Root == "" {
		conn, err = dbus.Dial("unix:path="+s.Socket, dbus.WithContext(ctx))
	} else {
		where = filepath.Join(s.Root, filepath.FromSlash(strings.TrimPrefix(s.Socket, "/")))
		var c net.Conn
		if c, err = hostfs.DialUnix(ctx, s.Root, s.Socket); err == nil {
			if conn, err = dbus.NewConn(c, dbus.WithContext(ctx)); err != nil {
				c.Close()
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to systemd at %s: %w", where, err)
	}
	if err := conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Geteuid()))}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("authenticating to systemd at %s: %w", where, err)
	}
	return conn, nil
}

var _ runtimectl.Units = Systemd{}

// State returns the unit's ActiveState ("active", "inactive", "failed",
// ...), or "" with an error when systemd does not know the unit (it is not
// loaded: no such service on this host).
func (s Systemd) State(ctx context.Context, unit string) (string, error) {
	conn, err := s.dial(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	var path dbus.ObjectPath
	if err := conn.Object(systemdDest, systemdPath).CallWithContext(ctx, managerInterface+".GetUnit", 0, unit).Store(&path); err != nil {
		return "", fmt.Errorf("systemd GetUnit %s: %w", unit, named(err))
	}
	v, err := conn.Object(systemdDest, path).GetProperty(unitInterface + ".ActiveState")
	if err != nil {
		return "", fmt.Errorf("systemd %s ActiveState: %w", unit, named(err))
	}
	st, ok := v.Value().(string)
	if !ok {
		return "", fmt.Errorf("systemd %s ActiveState: a %s, not a string", unit, v.Signature())
	}
	return st, nil
}

// Restart restarts unit as `systemctl restart` does (RestartUnit with mode
// "replace") and waits for the job to finish: a job result other than
// "done" (failed, timeout, dependency, canceled) is an error naming it.
func (s Systemd) Restart(ctx context.Context, unit string) error {
	return s.job(ctx, "RestartUnit", "restart", unit)
}

var _ runtimectl.Services = Systemd{}

// Start starts unit as `systemctl start` does (StartUnit, mode
// "replace") and waits for its job, as Restart does.
func (s Systemd) Start(ctx context.Context, unit string) error {
	return s.job(ctx, "StartUnit", "start", unit)
}

// Stop stops unit as `systemctl stop` does (StopUnit, mode "replace")
// and waits for its job.
func (s Systemd) Stop(ctx context.Context, unit string) error {
	return s.job(ctx, "StopUnit", "stop", unit)
}

// Reload asks systemd to read its unit files again, as `systemctl
// daemon-reload` does (Manager.Reload, which returns once it is done).
func (s Systemd) Reload(ctx context.Context) error {
	return s.call(ctx, "Reload", "")
}

// Enable creates the unit's [Install] links as `systemctl enable` does
// (EnableUnitFiles: persistent, not forced).
func (s Systemd) Enable(ctx context.Context, unit string) error {
	return s.call(ctx, "EnableUnitFiles", unit, []string{unit}, false, false)
}

// Disable removes the unit's [Install] links as `systemctl disable` does
// (DisableUnitFiles, persistent).
func (s Systemd) Disable(ctx context.Context, unit string) error {
	return s.call(ctx, "DisableUnitFiles", unit, []string{unit}, false)
}

// call calls a Manager method whose answer berth does not need.
func (s Systemd) call(ctx context.Context, method, unit string, args ...any) error {
	conn, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Object(systemdDest, systemdPath).CallWithContext(ctx, managerInterface+"."+method, 0, args...).Err; err != nil {
		return fmt.Errorf("systemd %s: %w", strings.TrimSpace(method+" "+unit), named(err))
	}
	return nil
}

// job calls a Manager method that queues a job for unit with mode
// "replace" and waits for the job to finish.
func (s Systemd) job(ctx context.Context, method, verb, unit string) error {
	timeout := s.JobTimeout
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := s.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Listen before asking: the job may finish before the reply is read.
	sigs := make(chan *dbus.Signal, 64)
	conn.Signal(sigs)
	var job dbus.ObjectPath
	if err := conn.Object(systemdDest, systemdPath).CallWithContext(ctx, managerInterface+"."+method, 0, unit, "replace").Store(&job); err != nil {
		return fmt.Errorf("systemd %s %s: %w", method, unit, named(err))
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("systemd %s of %s (job %s): no result within %s: %w", verb, unit, job, timeout, ctx.Err())
		case sig, ok := <-sigs:
			if !ok {
				return fmt.Errorf("systemd %s of %s (job %s): the connection closed before the job finished", verb, unit, job)
			}
			if sig.Name != managerInterface+".JobRemoved" || len(sig.Body) < 4 {
				continue
			}
			// JobRemoved(u id, o job, s unit, s result)
			if p, _ := sig.Body[1].(dbus.ObjectPath); p != job {
				continue
			}
			if result, _ := sig.Body[3].(string); result != "done" {
				return fmt.Errorf("systemd %s of %s: job %s", verb, unit, result)
			}
			return nil
		}
	}
}

// namedError is a D-Bus error with its name, which says more than its
// text (org.freedesktop.systemd1.NoSuchUnit,
// org.freedesktop.DBus.Error.AccessDenied).
type namedError struct{ err dbus.Error }

func (e namedError) Error() string { return e.err.Name + ": " + e.err.Error() }
func (e namedError) Unwrap() error { return e.err }

func named(err error) error {
	var de dbus.Error
	if errors.As(err, &de) {
		return namedError{de}
	}
	return err
}
