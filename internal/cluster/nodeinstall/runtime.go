package nodeinstall

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/platform"
)

// The container runtime as the installer drives it: restarts counted and
// held to the restart lease, services started and stopped through it, and
// every handler proven over CRI (and with a sandbox when asked).

// countingRuntime counts the restarts of a runtime, for the report, and
// takes the cluster's restart lock before the first.
type countingRuntime struct {
	configure.Runtime
	n    *int
	lock *restartLock
}

// services is the wrapped runtime's configure.Services (berth's
// nydus-snapshotter unit), or an error saying it has none.
func (c countingRuntime) services() (configure.Services, error) {
	sv, ok := c.Runtime.(configure.Services)
	if !ok {
		return nil, fmt.Errorf("%s cannot start or stop services", c.Name())
	}
	return sv, nil
}

// StartServices starts the wrapped runtime's services: not a restart of
// the runtime, so no lock and no count.
func (c countingRuntime) StartServices(ctx context.Context, units []string, restart bool) error {
	sv, err := c.services()
	if err != nil {
		return err
	}
	return sv.StartServices(ctx, units, restart)
}

// StopServices stops the wrapped runtime's services.
func (c countingRuntime) StopServices(ctx context.Context, units []string) error {
	sv, err := c.services()
	if err != nil {
		return err
	}
	return sv.StopServices(ctx, units)
}

// ServiceActive reports whether unit runs.
func (c countingRuntime) ServiceActive(ctx context.Context, unit string) bool {
	sv, err := c.services()
	return err == nil && sv.ServiceActive(ctx, unit)
}

// ServiceLog is unit's log.
func (c countingRuntime) ServiceLog(ctx context.Context, unit string) string {
	if sv, err := c.services(); err == nil {
		return sv.ServiceLog(ctx, unit)
	}
	return ""
}

// LoadConfig loads the wrapped runtime's configuration before a restart
// (configure.ConfigLoader); nil when it cannot.
func (c countingRuntime) LoadConfig(ctx context.Context) (string, error) {
	if cl, ok := c.Runtime.(configure.ConfigLoader); ok {
		return cl.LoadConfig(ctx)
	}
	return "", nil
}

// ProveSnapshotter proves a snapshotter through the wrapped runtime.
func (c countingRuntime) ProveSnapshotter(ctx context.Context, name string) error {
	sv, err := c.services()
	if err != nil {
		return err
	}
	return sv.ProveSnapshotter(ctx, name)
}

func (c countingRuntime) Restart(ctx context.Context) error {
	if err := c.lock.take(ctx); err != nil {
		return fmt.Errorf("waiting for the cluster's restart lock: %w", err)
	}
	*c.n++
	return c.Runtime.Restart(ctx)
}

// runningRuntime is a runtime that can say which daemon answers on its
// socket (runtimectl.Runtime).
type runningRuntime interface {
	Running(ctx context.Context) (name, version string, err error)
}

// useRunningVersion makes the version of the containerd that answers on
// the node's socket the one the configuration is written for: discovery
// found a containerd binary on the PATH, which need not be the one the
// unit runs (a tarball install beside the distribution's package, say), and
// the config format follows the daemon the restart starts again.
func (n *Installer) useRunningVersion(ctx context.Context, f *facts.Facts, runtimes map[string]configure.Runtime) {
	c := f.Runtimes.Containerd
	if c == nil {
		return
	}
	for _, rt := range runtimes {
		inner := rt
		if cr, ok := rt.(countingRuntime); ok {
			inner = cr.Runtime
		}
		rr, ok := inner.(runningRuntime)
		if !ok {
			continue
		}
		name, version, err := rr.Running(ctx)
		version = strings.TrimPrefix(version, "v")
		if err != nil || name != "containerd" || version == "" || version == c.Version {
			continue
		}
		n.cfg.Log.Info("containerd's version from the running daemon", "binary", c.Binary, "binaryVersion", c.Version, "running", version)
		c.Version = version
		return
	}
}

// runtimes finds the running container runtime of each platform, keyed
// by platform; restarts counts their restarts.
func (n *Installer) runtimes(ctx context.Context, ps []platform.Platform, restarts *int, lk *restartLock) (map[string]configure.Runtime, error) {
	out := map[string]configure.Runtime{}
	for _, p := range ps {
		l, err := n.layout(p)
		if err != nil {
			return nil, err
		}
		rt, err := n.cfg.Runtime(ctx, l)
		if err != nil {
			return nil, fmt.Errorf("platform %s: finding the running container runtime: %w", p, err)
		}
		out[p.String()] = countingRuntime{Runtime: rt, n: restarts, lock: lk}
	}
	return out, nil
}

// withVerifyErrors adds to err what each failed verification said (a
// sandbox's runtime text, say), so that the Node's Event carries it.
func withVerifyErrors(err error, out *install.Outcome) error {
	if out == nil {
		return err
	}
	var why []string
	for _, v := range out.Verified {
		if v.Error != "" {
			why = append(why, v.Handler+": "+v.Error)
		}
	}
	if len(why) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(why, "; "))
}

// criVerifier is the workflow's verifier: it asks the runtime over CRI,
// as ApplyLive did after a restart; a run that changed nothing still
// proves the handlers live.
type criVerifier struct {
	suffix   configure.Suffix
	runtimes map[string]configure.Runtime
	handlers map[string][]string
	facts    *facts.Facts
	sandbox  *SandboxCheck
	layout   func(platform.Platform) (platform.Layout, error)
	log      *slog.Logger
}

// SandboxCheck is how the installer reaches the runtime to prove a
// handler with a pod sandbox.
type SandboxCheck struct {
	// Socket is a layout's CRI socket (inside the host's root).
	Socket func(l platform.Layout) cri.Endpoint
	// Timeout bounds the sandbox's start (0: 2 min).
	Timeout time.Duration
}

// prove starts a sandbox of p's handler unless the host's facts say its
// VM cannot run here; a failure makes res not live.
func (v criVerifier) prove(ctx context.Context, p platform.Platform, res *configure.Verification) error {
	l, err := v.layout(p)
	if err != nil {
		return err
	}
	sock := v.sandbox.Socket(l)
	typ := ""
	if st, err := sock.Query(ctx, 10*time.Second); err == nil {
		typ = st.Handlers[v.suffix.Handler(p)].RuntimeType
	}
	if reason := cri.SkipReason(p, typ, v.facts); reason != "" {
		res.Sandbox, res.SandboxReason = string(cri.SandboxSkip), reason
		v.log.Warn("SKIP: the handler's sandbox was not started, so not proven", "platform", p.String(), "handler", v.suffix.Handler(p), "reason", reason)
		return nil
	}
	timeout := v.sandbox.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	// No log directory: the sandbox has no containers, and a path in
	// this pod would not be the host's.
	sb, err := sock.ProveSandbox(ctx, v.suffix.Handler(p), "", timeout)
	if err != nil {
		sb.Outcome, sb.Error = cri.SandboxFail, err.Error()
	}
	res.Sandbox = string(sb.Outcome)
	if sb.Outcome == cri.SandboxFail {
		res.Live, res.Error = false, "the handler is loaded but a pod sandbox with it failed: "+sb.Error
		v.log.Error("a pod sandbox with the handler failed", "platform", p.String(), "handler", v.suffix.Handler(p), "error", sb.Error)
		return nil
	}
	v.log.Info("a pod sandbox with the handler started and was removed", "platform", p.String(), "handler", v.suffix.Handler(p), "seconds", sb.Duration)
	return nil
}

func (v criVerifier) Verify(ctx context.Context, p platform.Platform) (configure.Verification, error) {
	rt := v.runtimes[p.String()]
	res := configure.Verification{Platform: p.String(), Handler: v.suffix.Handler(p), Runtime: rt.Name()}
	hs, err := rt.Handlers(ctx)
	if err != nil {
		res.Runtime, res.Error = "", err.Error()
		return res, nil
	}
	res.Handlers, res.Live = hs, slices.Contains(hs, res.Handler)
	v.handlers[rt.Name()] = hs
	if res.Live && v.sandbox != nil {
		if err := v.prove(ctx, p, &res); err != nil {
			return res, err
		}
	}
	return res, nil
}
