package nodeinstall

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/evaluate/preflight"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/platform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The install run: preflight every platform, install the ready ones, drop
// the platforms no longer asked for, and report what happened to each.

// layout is the runtime layout p is configured in.
func (n *Installer) layout(p platform.Platform) (platform.Layout, error) {
	if p.Distribution().UserLayout() {
		return *n.cfg.Custom, nil
	}
	l, ok := p.Distribution().Layout()
	if !ok {
		return platform.Layout{}, fmt.Errorf("platform %s: berth does not know where %s keeps its container runtime; use the custom distribution with its config file and unit", p, p.Distribution())
	}
	return l, nil
}

func (n *Installer) install(ctx context.Context, lk *restartLock) (*Report, error) {
	cfg := n.cfg
	rep := &Report{Mode: ModeInstall, Node: cfg.NodeName, Handlers: map[string][]string{}}
	if len(cfg.Platforms) == 0 {
		return rep, errors.New("node-installer: no --platform: berth never picks a platform for you")
	}
	if cfg.Manifest == nil || cfg.Fetcher == nil {
		return rep, errors.New("node-installer: install needs a manifest")
	}
	dopt := cfg.Discover
	dopt.Layout = cfg.Custom
	pre, err := preflight.Run(ctx, cfg.Root, preflight.Options{Discover: dopt, Check: cfg.Check, Platforms: cfg.Platforms})
	if err != nil {
		return rep, err
	}
	var ready []platform.Platform
	var notReady []check.Verdict
	for i, v := range pre.Verdicts {
		if v.Status == check.NotReady {
			notReady = append(notReady, v)
		} else {
			ready = append(ready, pre.Platforms[i])
		}
	}
	// The platforms berth installed here that the list no longer has,
	// from the node's own records: both must be readable before anything
	// is removed.
	dropped, err := n.dropped()
	if err != nil {
		return rep, err
	}
	if len(dropped) > 0 {
		if err := n.removeDropped(ctx, dropped, len(ready) > 0, rep, lk); err != nil {
			msg := fmt.Sprintf("berth could not remove %s, no longer in its platform list, from this node: %v", platformNames(dropped), err)
			if eerr := n.event(ctx, ReasonInstallFailed, "remove", msg); eerr != nil {
				cfg.Log.Error("writing the Event", "err", eerr)
			} else {
				rep.Events = append(rep.Events, ReasonInstallFailed)
			}
			return rep, err
		}
	}
	if len(ready) > 0 {
		failed := func(err error) (*Report, error) {
			msg := fmt.Sprintf("berth could not install %s on this node: %v", platformNames(ready), err)
			if eerr := n.event(ctx, ReasonInstallFailed, "install", msg); eerr != nil {
				cfg.Log.Error("writing the Event", "err", eerr)
			} else {
				rep.Events = append(rep.Events, ReasonInstallFailed)
			}
			// The record says which platforms failed and why; the labels
			// stay as the last successful run left them.
			st := n.installStatus(ready, err, notReady)
			if _, serr := n.applyNode(ctx, nil, &st); serr != nil {
				cfg.Log.Error("recording the install status", "err", serr)
			} else {
				rep.InstallStatus = &st
			}
			return rep, err
		}
		// The runtime of each platform first: nothing is written on a
		// node whose runtime cannot be restarted.
		runtimes, err := n.runtimes(ctx, ready, &rep.Restarts, lk)
		if err != nil {
			return failed(err)
		}
		n.useRunningVersion(ctx, pre.Facts, runtimes)
		if err := makePrefix(cfg.Writable, cfg.Prefix); err != nil {
			return failed(err)
		}
		if err := n.installReady(ctx, pre.Facts, ready, dropped, runtimes, rep); err != nil {
			return failed(err)
		}
	}
	for _, p := range dropped {
		rep.Platforms = append(rep.Platforms, PlatformResult{Platform: p.String(), Status: StatusRemoved})
	}
	want := map[string]string{}
	for _, p := range ready {
		r := PlatformResult{Platform: p.String(), Status: StatusInstalled}
		if key, ok := InstalledLabel(cfg.Suffix, p); ok {
			r.Label, want[key] = key, "true"
		} else {
			cfg.Log.Warn("platform name too long for a label: installed but not labelled", "platform", p.String())
		}
		rep.Platforms = append(rep.Platforms, r)
	}
	if cfg.KataDeployLabels && len(ready) > 0 {
		want[KataDeployLabel] = "true"
	}
	for _, v := range notReady {
		p, err := platform.Parse(v.Platform)
		if err != nil {
			return rep, fmt.Errorf("internal error: verdict for %q: %w", v.Platform, err)
		}
		r := notReadyResult(p, v)
		if key, ok := InstalledLabel(cfg.Suffix, p); ok {
			r.Label, want[key] = key, "no"
		}
		rep.Platforms = append(rep.Platforms, r)
	}
	rep.Labels = want
	st := n.installStatus(ready, nil, notReady)
	if rep.LabelsChanged, err = n.applyNode(ctx, want, &st); err != nil {
		return rep, err
	}
	rep.InstallStatus = &st
	rep.TEEKeys = n.teeKeys(pre.Facts, ready)
	if rep.TEEKeysChanged, err = n.applyTEEKeys(ctx, rep.TEEKeys); err != nil {
		return rep, err
	}
	// Every listed platform installed and its handler verified live: the
	// pods that need it may come.
	if len(notReady) == 0 && len(ready) > 0 {
		if rep.TaintRemoved, err = n.removeStartupTaint(ctx); err != nil {
			return rep, err
		}
	}
	for _, r := range rep.Platforms {
		if r.Status != StatusNotReady {
			continue
		}
		msg := fmt.Sprintf("platform %s is not ready on this node, so berth installed nothing for it: %s: %s", r.Platform, r.Blocker, r.Message)
		if r.Remedy != "" {
			msg += "; remedy: " + r.Remedy
		}
		if err := n.event(ctx, ReasonNotReady, r.Platform, msg); err != nil {
			return rep, err
		}
		rep.Events = append(rep.Events, ReasonNotReady)
		cfg.Log.Info("platform not ready: nothing installed", "platform", r.Platform, "check", r.Blocker)
	}
	return rep, nil
}

// installStatus is the record of a run: the ready platforms installed, or
// failed with failure when it is not nil, and the others not ready with
// their first failing check.
func (n *Installer) installStatus(ready []platform.Platform, failure error, notReady []check.Verdict) v1alpha1.InstallStatus {
	st := v1alpha1.InstallStatus{Time: metav1.NewTime(n.cfg.Now())}
	if m := n.cfg.Manifest; m != nil {
		st.Version, st.Digest = m.Version, m.Digest()
	}
	for _, p := range ready {
		pi := v1alpha1.PlatformInstall{Name: p.String(), Handler: n.cfg.Suffix.Handler(p), State: v1alpha1.InstallInstalled}
		if failure != nil {
			pi.State, pi.Error = v1alpha1.InstallFailed, failure.Error()
		}
		st.Platforms = append(st.Platforms, pi)
	}
	for _, v := range notReady {
		pi := v1alpha1.PlatformInstall{Name: v.Platform, State: v1alpha1.InstallNotReady}
		if p, err := platform.Parse(v.Platform); err == nil {
			pi.Name, pi.Handler = p.String(), n.cfg.Suffix.Handler(p)
			r := notReadyResult(p, v)
			pi.Error = r.Message
			if r.Blocker != "" {
				pi.Error = r.Blocker + ": " + r.Message
			}
		}
		st.Platforms = append(st.Platforms, pi)
	}
	return nodereport.NormalizeInstall(st)
}

// notReadyResult names the first failing check of a platform that is not
// ready: the root cause, in the catalogue's tree order.
func notReadyResult(p platform.Platform, v check.Verdict) PlatformResult {
	r := PlatformResult{Platform: p.String(), Status: StatusNotReady, Blocker: v.BlockedBy, Remedy: v.Remedy}
	for _, fd := range v.Findings {
		if fd.Status != check.Fail {
			continue
		}
		if r.Blocker == "" {
			r.Blocker = fd.ID
		}
		if fd.ID == r.Blocker {
			r.Message = fd.Message
			if r.Remedy == "" {
				r.Remedy = fd.Remedy
			}
			break
		}
	}
	return r
}

func platformNames(ps []platform.Platform) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return fmt.Sprint(s)
}

// installReady installs the ready platforms with berth install's
// workflow: the components are installed, each platform's configuration
// applied with a restart of its runtime and a check over CRI (rolled back
// if a handler is lost), and every handler verified live.
func (n *Installer) installReady(ctx context.Context, f *facts.Facts, ready, dropped []platform.Platform, runtimes map[string]configure.Runtime, rep *Report) error {
	cfg := n.cfg
	w := cfg.Writable
	wf := &install.Workflow{
		Installer: &install.Installer{
			Layout:   install.Layout{Root: cfg.Writable, Prefix: cfg.Prefix},
			Fetcher:  cfg.Fetcher,
			Parallel: cfg.Parallel,
			Log:      cfg.Log,
			Drop:     dropped,
		},
		Applier: install.RuntimeConfig{
			FS:      w,
			Options: configure.Options{Paths: cfg.Install.Paths(""), ContainerdUserDropIn: cfg.ContainerdDropIn},
			Kata:    cfg.Kata, Customs: cfg.CustomRuntimes, PruneCustoms: true,
			Target: func(p platform.Platform) (configure.Target, error) {
				if p.Distribution().UserLayout() {
					return configure.TargetForLayout(f, p, *cfg.Custom, cfg.ConfigVersion)
				}
				return configure.TargetFor(f, p, cfg.ConfigVersion)
			},
			Runtime: func(_ context.Context, p platform.Platform) (configure.Runtime, bool) {
				rt, ok := runtimes[p.String()]
				return rt, ok
			},
		},
		Verifier: criVerifier{suffix: cfg.Suffix, runtimes: runtimes, handlers: rep.Handlers, facts: f, sandbox: cfg.Sandbox, layout: n.layout, log: cfg.Log},
	}
	pl, err := wf.Plan(cfg.Manifest, ready)
	if err != nil {
		return err
	}
	out, err := wf.Run(ctx, pl)
	if out != nil {
		if out.Install != nil {
			rep.Installed = out.Install.Changed
		}
		for _, a := range out.Applied {
			rep.Changed = append(rep.Changed, a.Changed...)
		}
	}
	if err != nil {
		return withVerifyErrors(err, out)
	}
	if len(dropped) > 0 {
		// Verified: the previous installation, which still serves the
		// dropped platforms, is no longer a rollback target.
		rm, err := wf.Installer.PrunePrevious(ctx)
		if rm != nil {
			n.removed(rm, rep)
		}
		if err != nil {
			return fmt.Errorf("removing the files of %s: %w", platformNames(dropped), err)
		}
	}
	cfg.Log.Info("installed", "platforms", platformNames(ready), "id", pl.ID, "changed", rep.Installed, "config", len(rep.Changed), "restarts", rep.Restarts)
	return nil
}

// removed adds what an uninstall or prune removed and kept to rep.
func (n *Installer) removed(rm *install.Removal, rep *Report) {
	rep.Removed = append(rep.Removed, rm.Removed...)
	rep.Kept = append(rep.Kept, rm.Kept...)
	for _, k := range rm.Kept {
		n.cfg.Log.Warn("left in place", "path", k.Path, "why", k.Why)
	}
}

// dropped are the platforms the prefix's installations serve (current
// and previous, as cleanup removes them) that the platform list no longer
// has. The install record and configure's state are the node's own
// records, unlike labels, which anyone may edit: when either cannot be
// read, the run stops before it removes anything. A platform berth's
// installation does not serve (one configured by hand, say) is never
// dropped.
func (n *Installer) dropped() ([]platform.Platform, error) {
	st, err := install.Layout{Root: n.cfg.Writable, Prefix: n.cfg.Prefix}.Status()
	if err != nil {
		return nil, fmt.Errorf("reading the installation record under %s, so removing nothing: %w", n.cfg.Prefix, err)
	}
	w := n.cfg.Writable
	if _, err := configure.LoadState(w); err != nil {
		return nil, fmt.Errorf("reading berth's runtime configuration state, so removing nothing: %w", err)
	}
	var out []platform.Platform
	for _, s := range st.Platforms() {
		p, err := platform.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("the installation record names platform %q, so removing nothing: %w", s, err)
		}
		if !slices.ContainsFunc(n.cfg.Platforms, func(q platform.Platform) bool { return q.String() == p.String() }) {
			out = append(out, p)
		}
	}
	return out, nil
}

// removeDropped removes the runtime configuration of the dropped
// platforms, each with a restart that proves every other handler still
// live and rolls back otherwise (removeConfig, as cleanup does). Their
// files go with the install of the list's ready platforms (installing,
// true), which does not carry them into the new installation; when the
// installation serves nothing else, everything berth installed under the
// prefix is removed now, as cleanup does. A listed platform that is not
// ready keeps its files and configuration: its pods may be running.
func (n *Installer) removeDropped(ctx context.Context, dropped []platform.Platform, installing bool, rep *Report, lk *restartLock) error {
	cfg := n.cfg
	names := make([]string, len(dropped))
	for i, p := range dropped {
		names[i] = p.String()
	}
	cfg.Log.Info("removing platforms no longer in the list", "platforms", fmt.Sprint(names))
	// Not while their pods run: a chart change that drops a platform
	// waits on this node until its pods are gone (or is forced).
	if err := n.guard(ctx, names, rep); err != nil {
		return err
	}
	if err := n.removeConfig(ctx, names, rep, lk); err != nil {
		return err
	}
	if installing {
		return nil
	}
	l := install.Layout{Root: cfg.Writable, Prefix: cfg.Prefix}
	st, err := l.Status()
	if err != nil {
		return err
	}
	for _, s := range st.Platforms() {
		if !slices.Contains(names, s) {
			cfg.Log.Info("the dropped platforms' files stay until a run installs the list's platforms", "platforms", fmt.Sprint(names))
			return nil
		}
	}
	rm, err := (&install.Installer{Layout: l, Log: cfg.Log}).Uninstall(ctx)
	if rm != nil {
		n.removed(rm, rep)
	}
	if err != nil {
		return fmt.Errorf("removing what berth installed under %s: %w", cfg.Prefix, err)
	}
	return nil
}
