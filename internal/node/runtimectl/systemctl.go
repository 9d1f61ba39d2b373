package runtimectl

import (
	"context"
	"fmt"
	"strings"
	"time"

	"berth.dev/berth/internal/host/hostfs"
)

// Systemctl reaches systemd through the host's systemctl, as berth does
// on the host it runs on.
type Systemctl struct {
	// Run runs the command on the host (OnHost gives one for a host root).
	Run Runner
	// Path is systemctl's path on the host; "" is /usr/bin/systemctl.
	Path string
	// JobTimeout bounds a restart; zero means 2 minutes.
	JobTimeout time.Duration
}

func (s Systemctl) path() string {
	if s.Path != "" {
		return s.Path
	}
	return "/usr/bin/systemctl"
}

// State asks `systemctl is-active`, which prints the ActiveState and
// exits 0 only for "active".
func (s Systemctl) State(ctx context.Context, unit string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := s.Run(rctx, s.path(), "is-active", unit)
	if err != nil {
		return "", fmt.Errorf("systemctl is-active %s: %w", unit, err)
	}
	st := strings.TrimSpace(res.Stdout)
	switch {
	case res.ExitCode == 0:
		return "active", nil
	case st != "" && st != "active":
		return st, nil
	}
	return "", fmt.Errorf("systemctl is-active %s: exit %d: %s", unit, res.ExitCode, strings.TrimSpace(res.Stderr))
}

// Restart runs `systemctl restart`, which waits for the job.
func (s Systemctl) Restart(ctx context.Context, unit string) error {
	timeout := s.JobTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := s.Run(rctx, s.path(), "restart", unit)
	if err != nil {
		return fmt.Errorf("systemctl restart %s: %w", unit, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("systemctl restart %s: exit %d: %s", unit, res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return nil
}

var _ Services = Systemctl{}

// run runs systemctl with args, an error naming the command and its
// stderr on a non-zero exit.
func (s Systemctl) run(ctx context.Context, args ...string) error {
	timeout := s.JobTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := s.Run(rctx, append([]string{s.path()}, args...)...)
	if err != nil {
		return fmt.Errorf("systemctl %s: %w", strings.Join(args, " "), err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("systemctl %s: exit %d: %s", strings.Join(args, " "), res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	return nil
}

// Reload runs `systemctl daemon-reload`.
func (s Systemctl) Reload(ctx context.Context) error { return s.run(ctx, "daemon-reload") }

// Enable runs `systemctl enable`.
func (s Systemctl) Enable(ctx context.Context, unit string) error { return s.run(ctx, "enable", unit) }

// Disable runs `systemctl disable`.
func (s Systemctl) Disable(ctx context.Context, unit string) error {
	return s.run(ctx, "disable", unit)
}

// Start runs `systemctl start`, which waits for the job.
func (s Systemctl) Start(ctx context.Context, unit string) error { return s.run(ctx, "start", unit) }

// Stop runs `systemctl stop`, which waits for the job.
func (s Systemctl) Stop(ctx context.Context, unit string) error { return s.run(ctx, "stop", unit) }

// Journal reads a unit's log with the host's journalctl.
type Journal struct {
	// Run runs the command on the host; nil means there is no journal.
	Run Runner
	// Path is journalctl's path on the host; "" is /usr/bin/journalctl.
	Path string
}

// Log returns the unit's log of the last two minutes, "" when it cannot
// be read: it only explains a failure, it is never one.
func (j Journal) Log(ctx context.Context, unit string) string {
	if j.Run == nil {
		return ""
	}
	path := j.Path
	if path == "" {
		path = "/usr/bin/journalctl"
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// containerd writes logrus lines to stderr, which the journal stores
	// at priority info: its level is in the text, not the priority.
	res, err := j.Run(rctx, path, "-u", unit, "--since", "-2min", "--no-pager", "-o", "cat")
	if err != nil || res.ExitCode != 0 {
		return ""
	}
	return res.Stdout
}

// OnHost runs commands on a host root, or nil when the root is not a
// running system (nothing can run there). On a live root each command
// may take up to timeout: a root's own limit is for discovery's quick
// probes, and a restart waits for the runtime to stop and start.
func OnHost(root hostfs.Root, timeout time.Duration) Runner {
	if !root.Live() {
		return nil
	}
	if l, ok := root.(*hostfs.Live); ok {
		c := *l
		c.Timeout = timeout
		return c.Run
	}
	return root.Run
}
