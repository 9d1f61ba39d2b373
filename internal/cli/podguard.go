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
func (g *Globals) GuardRemoval(ctx context.Context, plats []platform.Platform, suffix configure.Suffix, st *configure.State, force bool) error {
	if len(plats) == 0 {
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
	for _, p := range plats {
		h := suffix.Handler(p)
		c.Handlers = append(c.Handlers, h)
		extra := []string{"--pods"}
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
