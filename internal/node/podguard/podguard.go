// Package podguard decides whether berth may take a runtime handler away
// from a node: uninstall, config remove and the node-installer's removal
// of a platform refuse while pod sandboxes using one of the handlers run
// there, since removing a handler (or the shim and guest image behind it)
// leaves such a pod unable to start another container, and a runtime
// restart on top may stop it. OpenShift sandboxed containers refuse an
// uninstall for the same reason; kata-deploy 3.28 killed every Kata pod on
// a DaemonSet change (kata issue #12761).
//
// The package only decides and words the decision: the pods come from the
// runtime over CRI (internal/node/cri), which berth, linking no gRPC, asks
// through berth-cluster. It imports nothing that talks to anything.
package podguard

import (
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/errdefs"
)

// MaxListed is how many pods a refusal names before "and K more": enough
// to find them, short enough for a terminal, an Event and a log line.
const MaxListed = 10

// Pod is a running pod sandbox as the runtime lists it.
type Pod struct {
	// Namespace and Name are the pod's, from the sandbox's metadata (as
	// the kubelet set them).
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Handler is the runtime handler the sandbox runs with.
	Handler string `json:"handler"`
	// ID is the runtime's sandbox id.
	ID string `json:"id,omitempty"`
}

// String is namespace/name, as kubectl names a pod.
func (p Pod) String() string { return p.Namespace + "/" + p.Name }

// Names lists pods as namespace/name, sorted, at most MaxListed of them,
// then "and K more".
func Names(pods []Pod) string {
	s := make([]string, len(pods))
	for i, p := range pods {
		s[i] = p.String()
	}
	slices.Sort(s)
	if len(s) <= MaxListed {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(s[:MaxListed], ", "), len(s)-MaxListed)
}

// Check is what the runtime said for one removal.
type Check struct {
	// Handlers are the handlers the removal takes away.
	Handlers []string
	// Socket is the runtime's CRI socket, for messages.
	Socket string
	// Pods are the running sandboxes with one of Handlers.
	Pods []Pod
	// Err is why the runtime could not be asked (nil: it answered). Not
	// knowing is treated as pods running: the runtime may be restarting
	// with every pod still up, and a removal cannot be taken back from
	// the pods' point of view.
	Err error
	// Force names how the user overrides a refusal ("--force", a chart
	// value), for the message.
	Force string
}

// Decide returns nil when the removal may go ahead (no pod runs on the
// handlers). Otherwise, without force it returns a refusal
// (errdefs.Refused: exit 1, nothing changed) naming the pods or why they
// could not be listed; with force it returns no error and a warning
// saying what was forced, which the caller must print.
func (c Check) Decide(force bool) (warning string, err error) {
	what := "handler " + strings.Join(c.Handlers, ", ")
	if len(c.Handlers) != 1 {
		what = "handlers " + strings.Join(c.Handlers, ", ")
	}
	var why string
	switch {
	case c.Err != nil:
		why = fmt.Sprintf("the container runtime could not be asked which pods run on %s (CRI socket %s: %v), so berth cannot tell that none does", what, c.Socket, c.Err)
	case len(c.Pods) > 0:
		n := "1 pod runs"
		if len(c.Pods) != 1 {
			n = fmt.Sprintf("%d pods run", len(c.Pods))
		}
		why = fmt.Sprintf("%s on %s on this node: %s", n, what, Names(c.Pods))
	default:
		return "", nil
	}
	if force {
		return fmt.Sprintf("%s: removing %s although %s", c.Force, what, why), nil
	}
	remedy := "delete those pods (or drain the node) first"
	if c.Err != nil {
		remedy = "start the container runtime and try again"
	}
	return "", errdefs.Refused(&RefusedError{Check: c, msg: fmt.Sprintf("refusing to remove %s: %s; removing it would leave those pods without their runtime: %s, or pass %s", what, why, remedy, c.Force)})
}

// RefusedError is a removal refused because pods run on a handler (or
// the runtime could not say): Check holds what was found.
type RefusedError struct {
	Check Check
	msg   string
}

func (e *RefusedError) Error() string { return e.msg }
