package install

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/platform"
)

// Workflow is berth install from start to finish: refuse a platform the
// node cannot run, install what the platforms need, apply each platform's
// runtime configuration, make the runtime load it, and ask the running
// runtime whether each platform's handler is live.
//
// What lies outside this package (the node's checks, the runtime's unit,
// the CRI socket) comes in as values, so that the workflow holds no state
// of its own and a test can replace any step. Plan, then Run:
//
//	pl, err := w.Plan(m, ps)
//	out, err := w.Run(ctx, pl)
type Workflow struct {
	// Installer fetches (its Fetcher) and installs the components.
	Installer *Installer
	// Checker refuses a platform whose checks fail on the node; nil runs
	// no checks.
	Checker Checker
	// Applier writes a platform's runtime configuration; nil installs the
	// files only (no configuration, no restart, no verification).
	Applier Applier
	// Restarter makes the runtime load what Applier changed; nil leaves
	// that to the user.
	Restarter Restarter
	// Verifier asks the running runtime for each platform's handler; nil
	// skips verification, and NoVerify says why (the root is not a
	// running system, say).
	Verifier Verifier
	NoVerify string
	// Reporter hears of each step as it ends; nil hears nothing.
	Reporter Reporter
	// Now is the clock of the install's duration; nil is time.Now.
	Now func() time.Time
}

// Checker runs a platform's checks on the node.
type Checker interface {
	// Check returns why p must not be installed here, or nil.
	Check(p platform.Platform) error
}

// Applier writes a platform's runtime configuration (berth config apply).
type Applier interface {
	Apply(ctx context.Context, p platform.Platform) (*configure.Result, error)
}

// Preflighter is an Applier that can tell, before anything is installed,
// that it would refuse to write a platform's runtime configuration (a
// path of it leaves the host root): Run asks it first, so that a refusal
// leaves no half install behind.
type Preflighter interface {
	Preflight(ctx context.Context, p platform.Platform) error
}

// Restarter makes the running runtime load the configuration that Apply
// changed for p (restarting its unit when asked and needed), and says
// what it did.
type Restarter interface {
	Restart(ctx context.Context, p platform.Platform, res *configure.Result) error
}

// Verifier asks the running runtime whether p's handler is live (berth
// verify). An error means the question could not be asked at all (no
// verifier binary, say); a runtime that does not answer is a Verification
// with Error set.
type Verifier interface {
	Verify(ctx context.Context, p platform.Platform) (configure.Verification, error)
}

// Reporter hears of each step of Run as it ends, to tell the user.
type Reporter interface {
	// Installed follows the install step, whatever its outcome (err).
	Installed(res *Result, took time.Duration, err error)
	// Verified follows each platform's verification.
	Verified(v configure.Verification)
	// NotVerified says why no platform is verified.
	NotVerified(reason string)
}

// Outcome is what Run did, as far as it got.
type Outcome struct {
	Plan    *Plan   `json:"plan"`
	Install *Result `json:"install,omitempty"`
	// Applied are the runtime configuration changes, per platform.
	Applied []*configure.Result `json:"applied,omitempty"`
	// Verified are the verifications, one per platform asked for.
	Verified []configure.Verification `json:"verified,omitempty"`
}

// InstallError is a failure of the install step itself (fetch, digest,
// staging, switch): nothing of the new installation is current.
type InstallError struct{ Err error }

func (e *InstallError) Error() string { return e.Err.Error() }
func (e *InstallError) Unwrap() error { return e.Err }

// NotLiveError says which platforms' handlers the runtime does not serve
// after the install (or could not be asked about).
type NotLiveError struct {
	Platforms []string
	// Of is how many platforms were verified.
	Of int
}

func (e *NotLiveError) Error() string {
	return fmt.Sprintf("installed, but the runtime does not serve %d of %d platforms: %s",
		len(e.Platforms), e.Of, strings.Join(e.Platforms, ", "))
}

// Refusals runs the checks of every platform and returns each refusal:
// what a dry run reports, where Plan stops at the first.
func (w *Workflow) Refusals(ps []platform.Platform) []error {
	if w.Checker == nil {
		return nil
	}
	var out []error
	for _, p := range ps {
		if err := w.Checker.Check(p); err != nil {
			out = append(out, err)
		}
	}
	return out
}

// Plan refuses a platform whose checks fail, then resolves what installing
// ps takes (the platforms the prefix already serves included).
func (w *Workflow) Plan(m *manifest.Manifest, ps []platform.Platform) (*Plan, error) {
	if errs := w.Refusals(ps); len(errs) > 0 {
		return nil, errs[0]
	}
	return w.Installer.Plan(m, ps)
}

// DryRun resolves what Run would install and returns it with every
// refusal that Plan would stop at, changing nothing.
func (w *Workflow) DryRun(m *manifest.Manifest, ps []platform.Platform) (*Plan, []error, error) {
	refusals := w.Refusals(ps)
	pl, err := w.Installer.Plan(m, ps)
	return pl, refusals, err
}

// Run installs pl, then for each platform asked for applies its runtime
// configuration and has the runtime load it, then verifies every one of
// them: all are verified and reported, and the error is a *NotLiveError
// when any handler is not live.
func (w *Workflow) Run(ctx context.Context, pl *Plan) (*Outcome, error) {
	out := &Outcome{Plan: pl}
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	start := now()
	// Every refusal before anything is changed: the installer's paths
	// (Install checks them again), then the configuration's.
	if err := w.Installer.Preflight(ctx, pl); err != nil {
		if w.Reporter != nil {
			w.Reporter.Installed(nil, now().Sub(start), err)
		}
		return out, err
	}
	if pf, ok := w.Applier.(Preflighter); ok {
		for _, p := range pl.requested {
			if err := pf.Preflight(ctx, p); err != nil {
				if w.Reporter != nil {
					w.Reporter.Installed(nil, now().Sub(start), err)
				}
				return out, err
			}
		}
	}
	res, err := w.Installer.Install(ctx, pl)
	if err != nil {
		err = &InstallError{Err: err}
	}
	out.Install = res
	if w.Reporter != nil {
		w.Reporter.Installed(res, now().Sub(start), err)
	}
	if err != nil || w.Applier == nil {
		return out, err
	}
	for _, p := range pl.requested {
		cres, err := w.Applier.Apply(ctx, p)
		if err != nil {
			return out, fmt.Errorf("installed, but applying the runtime configuration of %s failed: %w", p, err)
		}
		out.Applied = append(out.Applied, cres)
		if w.Restarter != nil {
			if err := w.Restarter.Restart(ctx, p, cres); err != nil {
				return out, fmt.Errorf("installed and configured %s, but: %w", p, err)
			}
		}
	}
	if w.Verifier == nil {
		if w.Reporter != nil {
			w.Reporter.NotVerified(w.NoVerify)
		}
		return out, nil
	}
	var notLive []string
	for _, p := range pl.requested {
		v, err := w.Verifier.Verify(ctx, p)
		if err != nil {
			return out, fmt.Errorf("installed and configured, but verifying %s: %w", p, err)
		}
		out.Verified = append(out.Verified, v)
		if w.Reporter != nil {
			w.Reporter.Verified(v)
		}
		if !v.Live {
			notLive = append(notLive, p.String())
		}
	}
	if len(notLive) > 0 {
		return out, &NotLiveError{Platforms: notLive, Of: len(pl.requested)}
	}
	return out, nil
}

// IsFailure reports whether err is the install failing or refused, or a
// handler not live (exit status 1), rather than a usage or internal error.
func IsFailure(err error) bool {
	var ie *InstallError
	var nl *NotLiveError
	var re *RefusedError
	var se *fetch.SizeError
	var sp *fetch.SpaceError
	return errors.As(err, &ie) || errors.As(err, &nl) || errors.As(err, &re) || errors.As(err, &se) || errors.As(err, &sp)
}

// RuntimeConfig is the Applier of berth install: it renders a platform's
// runtime configuration as berth config render does and applies it as
// berth config apply does. It is the one place install calls package
// configure.
type RuntimeConfig struct {
	// FS is the host root, writable.
	FS configure.FS
	// Target takes from the node's facts what the platform's files depend
	// on (config version, imports).
	Target func(p platform.Platform) (configure.Target, error)
	// Options are the render options; Paths.Prefix names the installation
	// prefix (as seen by the host, not under --root).
	Options configure.Options
	// Kata are the operator's Kata options per platform (by
	// platform.String()), added to Options for that platform's render.
	Kata map[string]configure.KataOptions
	// Customs are custom runtimes, each applied after its base platform.
	Customs []configure.CustomRuntime
	// PruneCustoms removes, after a platform's custom runtimes, those of
	// the platform the state holds that Customs no longer names: the
	// node-installer's values say which exist (kata-deploy removes a
	// custom runtime dropped from its values too).
	PruneCustoms bool
	// Runtime, when set and ok, is the running runtime: each change is
	// then applied with a restart, verified over CRI and rolled back if a
	// handler is lost (configure.ApplyLive); without it the files are only
	// written.
	Runtime func(ctx context.Context, p platform.Platform) (configure.Runtime, bool)
	// Change are options of each apply (configure.WithStep: the fault
	// suite's kill points); the shipped command passes none.
	Change []configure.Option
}

// Preflight renders p's runtime configuration and refuses it when a path
// it writes (the files, berth's state and backups) cannot be reached
// inside the host root through FS: a directory on the way that is a
// symlink leaving the root, or the file itself a symlink that does. It
// reads only.
func (c RuntimeConfig) Preflight(ctx context.Context, p platform.Platform) error {
	t, err := c.Target(p)
	if err != nil {
		return err
	}
	r, err := configure.Render(p, t, c.options(p))
	if err != nil {
		return err
	}
	names := []string{configure.StatePath, configure.BackupDir + "/x"}
	for _, f := range r.Host {
		names = append(names, f.Path)
	}
	prefix := strings.TrimPrefix(path.Clean("/"+c.Options.Paths.DefaultedPrefix()), "/")
	for _, n := range names {
		// The writer resolves each path so (configure's resolve): a path
		// it would refuse is refused here, before anything is installed.
		_, _, err := hostfs.Resolve(c.FS, n)
		if ue := (*hostfs.UnsafePathError)(nil); errors.As(err, &ue) {
			re := &RefusedError{Path: ue.Path, Why: "the runtime configuration is written there, and " + ue.Why, Outside: ue.Outside}
			if n == prefix || strings.HasPrefix(n, prefix+"/") {
				// A link on the prefix's own path: the files could go
				// where it leads, if the prefix named that.
				re.Why += "; give --prefix the path the link leads to, or install with --no-config"
			}
			return re
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// options are the render options of p: Options with p's Kata options.
func (c RuntimeConfig) options(p platform.Platform) configure.Options {
	o := c.Options
	o.Kata = c.Kata[p.String()]
	return o
}

// Apply renders and applies p's runtime configuration.
func (c RuntimeConfig) Apply(ctx context.Context, p platform.Platform) (*configure.Result, error) {
	t, err := c.Target(p)
	if err != nil {
		return nil, err
	}
	res, err := c.apply(ctx, p, t, c.options(p))
	if err != nil {
		return res, err
	}
	for _, cr := range c.Customs {
		if cr.Platform.String() != p.String() {
			continue
		}
		o := c.Options
		o.Paths.Custom, o.Kata = cr.Name, cr.Kata
		cres, err := c.apply(ctx, p, t, o)
		if cres != nil {
			res.Changed = append(res.Changed, cres.Changed...)
			res.Warnings = append(res.Warnings, cres.Warnings...)
		}
		if err != nil {
			return res, fmt.Errorf("custom runtime %s: %w", cr.Name, err)
		}
	}
	if c.PruneCustoms {
		if err := c.pruneCustoms(ctx, p, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// pruneCustoms removes the custom runtimes of p the state holds and
// Customs does not name, adding what it removed to res.
func (c RuntimeConfig) pruneCustoms(ctx context.Context, p platform.Platform, res *configure.Result) error {
	st, err := configure.LoadState(c.FS)
	if err != nil {
		return err
	}
	for _, h := range st.CustomHandlersOf(p, c.Options.Paths.Suffix) {
		if slices.ContainsFunc(c.Customs, func(cr configure.CustomRuntime) bool { return c.Options.Paths.Suffix.Of(cr.Name) == h }) {
			continue
		}
		var rres *configure.Result
		if rt, ok := c.runtime(ctx, p); ok {
			lres, err := configure.RemoveLive(ctx, c.FS, h, rt, c.Change...)
			if lres != nil {
				rres = lres.Result
			}
			if err != nil {
				return wrapRemove(h, err)
			}
		} else if rres, err = configure.Remove(c.FS, h, c.Change...); err != nil {
			return wrapRemove(h, err)
		}
		if rres != nil {
			res.Changed = append(res.Changed, rres.Changed...)
			res.Warnings = append(res.Warnings, rres.Warnings...)
		}
	}
	return nil
}

func wrapRemove(h string, err error) error {
	return fmt.Errorf("removing custom runtime %s, no longer configured: %w", h, err)
}

// runtime is the running runtime of p when Runtime gives one.
func (c RuntimeConfig) runtime(ctx context.Context, p platform.Platform) (configure.Runtime, bool) {
	if c.Runtime == nil {
		return nil, false
	}
	return c.Runtime(ctx, p)
}

// apply renders and applies one handler of p.
func (c RuntimeConfig) apply(ctx context.Context, p platform.Platform, t configure.Target, o configure.Options) (*configure.Result, error) {
	r, err := configure.Render(p, t, o)
	if err != nil {
		return nil, err
	}
	if rt, ok := c.runtime(ctx, p); ok {
		res, err := configure.ApplyLive(ctx, c.FS, r, rt, c.Change...)
		if res == nil || res.Result == nil {
			return nil, err
		}
		return res.Result, err
	}
	return configure.Apply(c.FS, r, c.Change...)
}
