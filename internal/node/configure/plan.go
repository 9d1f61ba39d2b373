package configure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/platform"
)

// NotReadyError says that a platform's checks fail on the node: its
// handler would be configured but could not run a pod.
type NotReadyError struct {
	Platform platform.Platform
	// Failing are the failing checks.
	Failing []check.Finding
}

// Error names the platform and each failing check, one a line.
func (e *NotReadyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "platform %s is not ready on this node; failing checks:", e.Platform)
	for _, fd := range e.Failing {
		fmt.Fprintf(&b, "\n  - %s: %s", fd.ID, fd.Message)
	}
	return b.String()
}

// Readiness evaluates p's checks on the node: a *NotReadyError when they
// fail, nil when p may be configured.
func Readiness(f *facts.Facts, p platform.Platform) error {
	ev, err := check.NewEvaluator(catalog.For(f))
	if err != nil {
		return fmt.Errorf("internal error in the check catalogue: %w", err)
	}
	vs := ev.Evaluate(f, []platform.Platform{p}, check.Options{})
	if len(vs) == 0 || vs[0].Status != check.NotReady {
		return nil
	}
	nr := &NotReadyError{Platform: p}
	for _, fd := range vs[0].Findings {
		if fd.Status == check.Fail {
			nr.Failing = append(nr.Failing, fd)
		}
	}
	return nr
}

// unforceable are the checks --force never overrides: a runtime
// configuration that does not load would keep the runtime down at its
// next restart, whoever restarts it.
var unforceable = [...]string{"runtime.config.parse"}

// Unforceable reports whether a check --force cannot override fails:
// the refusal then stands with --force too.
func (e *NotReadyError) Unforceable() bool {
	for _, fd := range e.Failing {
		if slices.Contains(unforceable[:], fd.ID) {
			return true
		}
	}
	return false
}

// TargetError says that the node's facts and the request cannot tell
// what to write (a containerd version unknown and no config version
// given, a distribution whose runtime berth does not know): the request
// needs more, the node is not at fault.
type TargetError struct{ Err error }

// Error is the underlying error's: it already says what to give.
func (e *TargetError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error.
func (e *TargetError) Unwrap() error { return e.Err }

// PlanRequest is what Plan renders a platform's files from.
type PlanRequest struct {
	Platform platform.Platform
	// Custom is the custom distribution's runtime layout (nil for the
	// other distributions, whose layout berth knows).
	Custom *platform.Layout
	// ConfigVersion is the containerd config version to write when the
	// node's containerd version is unknown (0: refuse then).
	ConfigVersion int
	// Options are the files' paths and labels.
	Options Options
	// Discover are the discovery options; Layout is set from Custom.
	Discover discover.Options
	// Force renders a platform whose checks fail.
	Force bool
}

// Plan discovers the node at root, evaluates the platform's checks there
// and renders its files. A platform whose checks fail is a
// *NotReadyError, unless Force (which never overrides a runtime
// configuration that does not parse): it is then rendered and the
// *NotReadyError returned beside it, for a warning. A request the facts
// cannot complete is a *TargetError; a runtime config berth cannot read,
// a refusal (IsRefused).
func Plan(ctx context.Context, root hostfs.Root, req PlanRequest) (*Rendered, *NotReadyError, error) {
	opt := req.Discover
	opt.Layout = req.Custom
	f := discover.Run(ctx, root, opt)
	var nr *NotReadyError
	if err := Readiness(f, req.Platform); errors.As(err, &nr) {
		if !req.Force || nr.Unforceable() {
			return nil, nil, nr
		}
	} else if err != nil {
		return nil, nil, err
	}
	var t Target
	var err error
	if req.Custom == nil {
		t, err = TargetFor(f, req.Platform, req.ConfigVersion)
	} else {
		t, err = TargetForLayout(f, req.Platform, *req.Custom, req.ConfigVersion)
	}
	if err != nil {
		if IsRefused(err) {
			return nil, nr, err
		}
		return nil, nr, &TargetError{Err: err}
	}
	r, err := Render(req.Platform, t, req.Options)
	return r, nr, err
}
