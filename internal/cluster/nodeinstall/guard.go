package nodeinstall

import (
	"context"
	"fmt"
	"slices"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/podguard"
	"berth.dev/berth/platform"
)

// ForceRemoveFlag is how an operator overrides the removal guard: the
// node-installer's flag (the chart's nodeInstaller.forceRemove sets it).
const ForceRemoveFlag = "--force-remove"

// guard refuses the removal of plats (platform names, as the installation
// record lists them) while pods run on their handlers on this node, or
// while the runtime cannot say (podguard), before anything is removed. A
// refusal is recorded as a Node Event (ReasonRemovalBlocked) naming the
// pods, and the pods in rep.Blocked; with ForceRemove the removal goes
// ahead and rep.Forced says what was overridden. Without cfg.Pods it
// guards nothing.
func (n *Installer) guard(ctx context.Context, plats []string, rep *Report) error {
	cfg := n.cfg
	if cfg.Pods == nil || len(plats) == 0 {
		return nil
	}
	st, err := configure.LoadState(cfg.Writable)
	if err != nil {
		return err
	}
	// One question per runtime: the platforms of one node normally share
	// it, and the handlers of one question are refused together.
	type group struct {
		layout   platform.Layout
		handlers []string
	}
	var groups []*group
	for _, s := range plats {
		p, err := platform.Parse(s)
		if err != nil {
			return fmt.Errorf("the installation record names platform %q: %w", s, err)
		}
		h := cfg.Suffix.Handler(p)
		var l platform.Layout
		if ps, ok := st.Platforms[h]; ok && ps.Layout != nil {
			l = *ps.Layout
		} else if l, err = n.layout(p); err != nil {
			return err
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return g.layout.Socket == l.Socket })
		if i < 0 {
			groups = append(groups, &group{layout: l})
			i = len(groups) - 1
		}
		// The custom runtimes made from p go with it, and so do their pods.
		for _, h := range append([]string{h}, st.CustomHandlersOf(p, cfg.Suffix)...) {
			if !slices.Contains(groups[i].handlers, h) {
				groups[i].handlers = append(groups[i].handlers, h)
			}
		}
	}
	for _, g := range groups {
		pods, err := cfg.Pods(ctx, g.layout, g.handlers)
		c := podguard.Check{Handlers: g.handlers, Socket: g.layout.Socket, Pods: pods, Err: err, Force: ForceRemoveFlag}
		warn, gerr := c.Decide(cfg.ForceRemove)
		rep.Blocked = append(rep.Blocked, pods...)
		if gerr != nil {
			if eerr := n.event(ctx, ReasonRemovalBlocked, "remove", gerr.Error()); eerr != nil {
				cfg.Log.Error("writing the Event", "err", eerr)
			} else {
				rep.Events = append(rep.Events, ReasonRemovalBlocked)
			}
			return gerr
		}
		if warn != "" {
			cfg.Log.Warn(warn)
			rep.Forced = warn
		}
	}
	return nil
}
