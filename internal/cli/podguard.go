package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/podguard"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// ForceFlag is how uninstall and config remove are told to remove a
// platform while pods run on its handler.
const ForceFlag = "--force"

// GuardRemoval refuses (exit 1, errdefs.Refused, nothing changed) to take
// away the handlers of plats while pods run on them on this node, or while
// the runtime cannot say which do (podguard), unless force: then it
// prints what it overrode as a warning and lets the removal go ahead. The
// pods are listed over CRI by `verify --pods` (berth-cluster: berth links
// no gRPC). A root that is not a running system (--root without --live)
// runs no pods, and nothing is asked there. st is berth's configuration
// state, which holds the runtime layout a custom distribution's platform
// was configured with (nil: none known).
func (g *Globals) GuardRemoval(ctx context.Context, rs []Removal, suffix configure.Suffix, st *configure.State, force bool) error {
	if len(rs) == 0 {
		return nil
	}
	root, cleanup, err := g.OpenRoot()
	defer cleanup()
	if err != nil {
		return err
	}
	if !root.Live() {
		return nil
	}
	c := podguard.Check{Force: ForceFlag}
	var sockets, errs []string
	for _, r := range groupRemovals(rs) {
		p, h := r.Platform, suffix.Handler(r.Platform)
		c.Handlers = append(c.Handlers, r.handlers...)
		extra := []string{"--pods", "--pods-handler", strings.Join(r.handlers, ",")}
		if p.Distribution().UserLayout() {
			ps, ok := configure.PlatformState{}, false
			if st != nil {
				ps, ok = st.Platforms[h]
			}
			if !ok || ps.Layout == nil {
				errs = append(errs, fmt.Sprintf("%s: the runtime socket of this custom platform is not recorded", h))
				continue
			}
			extra = append(extra, "--socket", filepath.Join(g.root, filepath.FromSlash(strings.TrimPrefix(ps.Layout.Socket, "/"))))
		}
		pods, socket, err := g.runningPods(ctx, p, suffix, extra)
		if socket != "" && !slices.Contains(sockets, socket) {
			sockets = append(sockets, socket)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", h, err))
		}
		c.Pods = append(c.Pods, pods...)
	}
	c.Socket = strings.Join(sockets, ", ")
	if len(errs) > 0 {
		c.Err = errors.New(strings.Join(errs, "; "))
	}
	warn, err := c.Decide(force)
	if err != nil {
		return err
	}
	if warn != "" {
		fmt.Fprintln(g.stderr, "warning:", warn)
	}
	return nil
}

// Removal is one handler a command is about to take away and the
// platform it was configured from: a custom runtime's handler differs from
// its base platform's, and only the handler's own pods block it.
type Removal struct {
	Platform platform.Platform
	Handler  string
}

// RemovalsOf are the removals of plats' own handlers and of the custom
// runtimes made from them, which go with them (uninstall).
func RemovalsOf(plats []platform.Platform, suffix configure.Suffix, st *configure.State) []Removal {
	var rs []Removal
	for _, p := range plats {
		rs = append(rs, Removal{Platform: p, Handler: suffix.Handler(p)})
		if st != nil {
			for _, h := range st.CustomHandlersOf(p, suffix) {
				rs = append(rs, Removal{Platform: p, Handler: h})
			}
		}
	}
	return rs
}

// removalGroup is the handlers of one platform, asked in one question.
type removalGroup struct {
	Platform platform.Platform
	handlers []string
}

func groupRemovals(rs []Removal) []removalGroup {
	var gs []removalGroup
	for _, r := range rs {
		i := slices.IndexFunc(gs, func(g removalGroup) bool { return g.Platform == r.Platform })
		if i < 0 {
			gs = append(gs, removalGroup{Platform: r.Platform})
			i = len(gs) - 1
		}
		if !slices.Contains(gs[i].handlers, r.Handler) {
			gs[i].handlers = append(gs[i].handlers, r.Handler)
		}
	}
	return gs
}

// runningPods runs `verify --platform P --pods -o json` (and extra)
// through the binary's wiring and reads the pods and the socket from its
// report; the error says why the pods could not be listed.
func (g *Globals) runningPods(ctx context.Context, p platform.Platform, suffix configure.Suffix, extra []string) ([]podguard.Pod, string, error) {
	if g.verify == nil {
		return nil, "", errors.New("this build of berth cannot ask the runtime which pods run")
	}
	var out, errOut bytes.Buffer
	c := *g
	c.stdin, c.stdout, c.stderr, c.output = bytes.NewReader(nil), &out, &errOut, string(output.JSON)
	verr := g.verify(ctx, &c, p, suffix, extra...)
	var r struct {
		Socket    string         `json:"socket"`
		Pods      []podguard.Pod `json:"pods"`
		PodsError string         `json:"podsError"`
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		// No report: verify could not run (berth-cluster missing, say).
		why := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(errOut.String()), "Error: "))
		if why == "" && verr != nil {
			why = verr.Error()
		}
		return nil, "", fmt.Errorf("berth verify --pods printed no report: %s", why)
	}
	if r.PodsError != "" {
		return r.Pods, r.Socket, errors.New(r.PodsError)
	}
	return r.Pods, r.Socket, nil
}
