package runtimectl

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// Change applies and removes platforms' runtime configuration on the
// host berth runs on, as `berth config apply|remove` and `berth install`
// do: with Restart, a change is loaded by restarting the runtime's unit
// with the host's systemctl and proven over CRI, and rolled back if a
// handler is lost (configure.ApplyLive); without, the commands that load
// and verify it are printed. Messages go to Out and Err.
type Change struct {
	// Host is the host root: the runtime is restarted only on a live one.
	Host hostfs.Root
	// FS is the host root, writable.
	FS configure.FS
	// Restart restarts the runtime when something changed.
	Restart bool
	// Ask returns how the runtime is asked whether p's handler is live.
	Ask func(p platform.Platform) Ask
	// Snapshotter returns how the runtime proves p's proxy snapshotter
	// (Runtime.Snapshotter); nil proves none.
	Snapshotter func(p platform.Platform) func(ctx context.Context, name string) error
	// Poll is the pause between two questions (Runtime.Poll).
	Poll time.Duration
	// Systemctl and Journalctl are the commands' paths on the host; ""
	// are their usual /usr/bin paths.
	Systemctl, Journalctl string
	// Out and Err receive what changed and the warnings.
	Out, Err io.Writer
	// Suffix is the side-by-side install RemovePlatforms removes the
	// handlers of (empty: the unsuffixed install).
	Suffix configure.Suffix
	// Options are passed to every apply and remove (configure.WithStep:
	// the fault suite's kill points).
	Options []configure.Option
}

// commandTimeout bounds each systemctl and journalctl run: a restart
// waits for the runtime to stop and start.
const commandTimeout = 3 * time.Minute

// Live is the runtime a restart restarts: the first active unit of l on a
// running system. ok is false (with a warning said) when there is none,
// and the change is then made without a restart.
func (c Change) Live(ctx context.Context, l platform.Layout, p platform.Platform) (configure.Runtime, bool) {
	if !c.Host.Live() {
		fmt.Fprintf(c.Err, "warning: not restarting: --root %s is not a running system\n", c.Host.Path())
		return nil, false
	}
	run := OnHost(c.Host, commandTimeout)
	f := Finder{
		Units:   Systemctl{Run: run, Path: c.Systemctl},
		Ask:     func(platform.Layout) Ask { return c.Ask(p) },
		Journal: Journal{Run: run, Path: c.Journalctl}.Log,
		Poll:    c.Poll,
		Config:  func(l platform.Layout) *ContainerdConfig { return ContainerdConfigFor(c.Host, run, l) },
	}
	if c.Snapshotter != nil {
		f.Snapshotter = func(platform.Layout) func(context.Context, string) error { return c.Snapshotter(p) }
	}
	rt, err := f.Find(ctx, l)
	if err != nil {
		fmt.Fprintf(c.Err, "warning: none of %s is active: nothing restarted\n", strings.Join(l.Units, ", "))
		return nil, false
	}
	return rt, true
}

// Apply writes r's files (restarting and proving the runtime with
// Restart) and says what changed.
func (c Change) Apply(ctx context.Context, r *configure.Rendered) error {
	l, _ := r.Platform.Distribution().Layout()
	if r.Layout != nil {
		l = *r.Layout
	}
	if c.Restart {
		if rt, ok := c.Live(ctx, l, r.Platform); ok {
			res, err := configure.ApplyLive(ctx, c.FS, r, rt, c.Options...)
			return c.reportLive(res, err, "applied")
		}
	}
	res, err := configure.Apply(c.FS, r, c.Options...)
	if err != nil {
		return err
	}
	c.ReportNoRestart(res, l, r.Platform, "applied")
	return nil
}

// Remove removes what berth wrote for handler (of platform p), restoring
// backups, and says what changed; st names the layout of a custom
// distribution's platform, whose unit is restarted.
func (c Change) Remove(ctx context.Context, st *configure.State, handler string, p platform.Platform) error {
	l, _ := p.Distribution().Layout()
	if ps, ok := st.Platforms[handler]; ok && ps.Layout != nil {
		// A custom distribution's paths, as given when it was applied.
		l = *ps.Layout
	}
	if c.Restart {
		if rt, ok := c.Live(ctx, l, p); ok {
			res, err := configure.RemoveLive(ctx, c.FS, handler, rt, c.Options...)
			return c.reportLive(res, err, "removed")
		}
	}
	res, err := configure.Remove(c.FS, handler, c.Options...)
	if err != nil {
		return err
	}
	c.ReportNoRestart(res, l, p, "removed")
	return nil
}

// RemoveHandlers removes each of handlers, whose platform the state
// names (or the handler is, for a state written before it did).
func (c Change) RemoveHandlers(ctx context.Context, st *configure.State, handlers []string) error {
	for _, h := range handlers {
		p, err := platform.Parse(st.Platforms[h].Platform)
		if err != nil {
			if p, err = platform.Parse(h); err != nil {
				return fmt.Errorf("%s: the state names platform %q, which berth no longer knows: %w", configure.StatePath, st.Platforms[h].Platform, err)
			}
		}
		if err := c.Remove(ctx, st, h, p); err != nil {
			return err
		}
	}
	return nil
}

// RemovePlatforms removes the configuration of each of plats (platform
// names, as an installation record lists them) that the state still
// holds: uninstall's first step.
func (c Change) RemovePlatforms(ctx context.Context, st *configure.State, plats []string) error {
	for _, s := range plats {
		p, err := platform.Parse(s)
		if err != nil {
			return fmt.Errorf("installation record names platform %q: %w", s, err)
		}
		h := c.Suffix.Handler(p)
		// Custom runtimes made from p run its binaries: they go first.
		for _, ch := range st.CustomHandlersOf(p, c.Suffix) {
			if err := c.Remove(ctx, st, ch, p); err != nil {
				return err
			}
		}
		if _, ok := st.Platforms[h]; !ok {
			continue
		}
		if err := c.Remove(ctx, st, h, p); err != nil {
			return err
		}
	}
	return nil
}

// reportLive says what a live apply or remove did; a rollback is err.
func (c Change) reportLive(res *configure.LiveResult, err error, verb string) error {
	if err != nil {
		if res != nil && res.Result != nil {
			c.warn(res.Result)
		}
		return err
	}
	if c.SayChanged(res.Result, verb) || res.Restarted {
		// With no file to change a restart still loads what a killed or
		// restart-less run left in place.
		fmt.Fprintf(c.Out, "restarted; live handlers: %s\n", strings.Join(res.After, ", "))
	}
	return nil
}

// ReportNoRestart says what changed and the exact commands that load and
// verify it: without a restart the runtime still runs the old files.
func (c Change) ReportNoRestart(res *configure.Result, l platform.Layout, p platform.Platform, verb string) {
	if !c.SayChanged(res, verb) || len(l.Units) == 0 {
		return
	}
	// A service berth ships (nydus-snapshotter) starts before the runtime
	// reads the proxy plugin, and stops while its unit file is there.
	if units := configure.ServiceUnits(res.Changed); len(units) > 0 {
		if verb == "removed" {
			// Its unit file is gone, so systemctl disable no longer can.
			for _, u := range units {
				fmt.Fprintf(c.Err, "warning: %s was removed while it may run (--restart stops and disables it first): systemctl stop %s && rm -f /etc/systemd/system/*.wants/%s && systemctl daemon-reload\n", u, u, u)
			}
		} else {
			fmt.Fprintf(c.Out, "to start its services: systemctl daemon-reload && systemctl enable --now %s\n", strings.Join(units, " "))
		}
	}
	fmt.Fprintf(c.Out, "to load it: systemctl restart %s && berth verify --platform %s\n(or run again with --restart, which also rolls back if a handler is lost)\n", ShellWord(l.Units[0]), p)
}

// ShellWord is s as one word of a POSIX shell command line: as is when
// every byte is one the shell takes literally, else single-quoted. A
// custom unit name may hold a backslash (systemd's \x2d escapes), which
// the shell would otherwise eat, and the command printed must restart
// the unit named, nothing more.
func ShellWord(s string) string {
	safe := s != ""
	for i := 0; i < len(s) && safe; i++ {
		c := s[i]
		safe = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("@%+=:,./_-", c) >= 0
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (c Change) warn(res *configure.Result) {
	for _, w := range res.Warnings {
		fmt.Fprintln(c.Err, "warning:", w)
	}
}

// SayChanged prints res's warnings and changed files; false when nothing
// changed, so that nothing is restarted or suggested.
func (c Change) SayChanged(res *configure.Result, verb string) bool {
	c.warn(res)
	if len(res.Changed) == 0 {
		fmt.Fprintf(c.Out, "%s: nothing to change (already %s)\n", res.Handler, verb)
		return false
	}
	fmt.Fprintf(c.Out, "%s: %s\n", res.Handler, verb)
	for _, ch := range res.Changed {
		fmt.Fprintf(c.Out, "  /%s\n", ch)
	}
	return true
}
