package clustercmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/podguard"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// verifyResult is what berth verify reports.
type verifyResult struct {
	Platform       string       `json:"platform"`
	Handler        string       `json:"handler"`
	Socket         string       `json:"socket"`
	RuntimeName    string       `json:"runtimeName,omitempty"`
	RuntimeVersion string       `json:"runtimeVersion,omitempty"`
	Live           bool         `json:"live"`
	Found          *cri.Handler `json:"found,omitempty"`
	// Handlers are all handlers the runtime reported, for the "did you
	// mean" case.
	Handlers []string `json:"handlers"`
	// Node is set when a kubeconfig was given: whether the node object
	// lists the handler in status.runtimeHandlers.
	Node *nodeResult `json:"node,omitempty"`
	// Sandbox is set with --sandbox when the handler is live: whether a
	// pod sandbox started with it (pass), did not (fail, with the
	// runtime's text) or could not be tried on this node (skip, with the
	// reason).
	Sandbox *cri.SandboxResult `json:"sandbox,omitempty"`
	// Snapshotter is set with --snapshotter when the live handler names
	// a snapshotter: whether containerd has it loaded and it answers.
	Snapshotter *snapshotterResult `json:"snapshotter,omitempty"`
	// Pods are, with --pods, the pods running on the handler on this node
	// (ready sandboxes with it), which uninstall and config remove refuse
	// to take it away from; PodsError is why they could not be listed.
	Pods      []podguard.Pod `json:"pods,omitempty"`
	PodsError string         `json:"podsError,omitempty"`
	// Unfinished are the changes of berth's runtime configuration a
	// killed run left under --root (its journal), each with the command
	// that completes it: a handler of one is not proven until it ran.
	Unfinished []configure.Pending `json:"unfinished,omitempty"`
}

// unfinishedChanges reads the journal of an interrupted change under
// root, confined to it; nil when there is none or it cannot be read
// (a snapshot root holds no journal berth could complete).
func unfinishedChanges(root string) []configure.Pending {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil
	}
	defer r.Close()
	data, err := r.ReadFile(configure.IntentPath)
	if err != nil {
		return nil
	}
	in, err := configure.ParseIntent(data)
	if err != nil {
		return []configure.Pending{{Handler: "?", Interrupted: true, NoRestart: true}}
	}
	return in.Owed()
}

// snapshotterResult is the live proof of the handler's snapshotter: a
// proxy plugin in the config proves nothing until its daemon answers.
type snapshotterResult struct {
	Name  string `json:"name"`
	Live  bool   `json:"live"`
	Error string `json:"error,omitempty"`
}

type nodeResult struct {
	Name     string   `json:"name"`
	Listed   bool     `json:"listed"`
	Handlers []string `json:"handlers"`
	Error    string   `json:"error,omitempty"`
}

func newVerifyCmd(g *cli.Globals) *cobra.Command {
	var plat, socket, kubeconfig, node, suffixFlag string
	var timeout, sandboxTimeout time.Duration
	var sandbox, snapshotter, pods bool
	var podHandlers []string
	cmd := &cobra.Command{
		Use:   "verify --platform P",
		Short: "Ask the running container runtime whether the platform's handler is live",
		Long: `verify asks the container runtime over its CRI socket (CRI Status, verbose)
whether the platform's runtime handler is loaded: a configuration on disk
proves nothing until the runtime has read it. The socket is the one of the
platform's distribution under --root, unless --socket is given.

With --install-suffix it looks for the handler of that side-by-side install
(kata-qemu-snp-canary for --install-suffix canary), as install and the
node-installer named it.

With --kubeconfig it also asks Kubernetes whether the node (--node, default
the host name) lists the handler in Node.status.runtimeHandlers, which the
kubelet fills from the runtime (Kubernetes >= 1.30; containerd 1.x reports
no handlers there).

With --sandbox it then proves the handler: it starts a pod sandbox with it
over CRI (for Kata, a VM boots), stops and removes it, within
--sandbox-timeout. A failure prints the runtime's error text, in which Kata
passes on the shim's and the hypervisor's. A Kata handler whose VM runs on
the node needs /dev/kvm (/dev/mshv on AKS): where discovery finds it
missing or unusable the proof is reported as SKIP with the reason and no
sandbox is started. A handler that runs no Kata shim, and peer pods, need
no device.

Exit status: 0 the handler is live (and, with --kubeconfig, listed by the
node; with --sandbox, the sandbox started or was skipped), 1 it is not
(or the runtime or the API server could not be asked, or the sandbox
failed), 2 usage error.

With --snapshotter it also proves the snapshotter the handler names
(containerd only): containerd's introspection service lists it as a loaded
snapshotter plugin, and a probe snapshot prepared and removed through it (in
namespace berth-probe) reaches it, so that a proxy plugin whose daemon is not
running (berth-nydus without berth-nydus-snapshotter.service) fails; exit 1
when it does not.

With --pods it also lists the pods running on the handler on this node:
the ready pod sandboxes the runtime runs with it (namespace/name), berth's
own proving sandboxes aside. It does not change the exit status.`,
		Example: `  berth verify --platform kubeadm-qemu-snp
  berth verify -p k3s-qemu-tdx --socket /run/k3s/containerd/containerd.sock -o json
  berth verify -p kubeadm-qemu-snp --sandbox --sandbox-timeout 5m
  berth verify -p kubeadm-qemu-snp --install-suffix canary`,
		Args: cli.NoArgs,
		// Errors go back to the caller, which prints them once: the root
		// command, or install verifying in-process (which reads the report
		// on stdout, so usage text must never follow it there).
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.Format(output.Table, output.JSON, output.YAML)
			if err != nil {
				return err
			}
			p, err := cli.ParsePlatformFlag(plat)
			if err != nil {
				return err
			}
			suffix, err := cli.ParseSuffixFlag(suffixFlag, p)
			if err != nil {
				return err
			}
			handler := suffix.Handler(p)
			// --socket is a path on this machine; the distribution's
			// socket is the root's, resolved inside it (a link there
			// never reaches a runtime outside the root).
			ep := cri.Endpoint{Path: socket}
			if socket == "" {
				l, ok := p.Distribution().Layout()
				if !ok {
					return cli.UsageErr(fmt.Errorf("distribution %s has no known socket: pass --socket", p.Distribution()))
				}
				ep = cri.Endpoint{Root: g.Root(), Path: l.Socket}
			}
			res := verifyResult{Platform: p.String(), Handler: handler, Socket: ep.String(), Handlers: []string{}, Unfinished: unfinishedChanges(g.Root())}
			st, qerr := ep.Query(cmd.Context(), timeout)
			if qerr == nil {
				res.RuntimeName, res.RuntimeVersion = st.RuntimeName, st.RuntimeVersion
				res.Handlers = st.Names()
				if h, ok := st.Handlers[handler]; ok {
					res.Live, res.Found = true, &h
				}
			}
			if kubeconfig != "" {
				if node == "" {
					h, err := os.Hostname()
					if err != nil {
						return cli.UsageErr(fmt.Errorf("--node: %w", err))
					}
					node = h
				}
				nr := &nodeResult{Name: node, Handlers: []string{}}
				names, err := cri.NodeRuntimeHandlers(cmd.Context(), kubeconfig, node)
				if err != nil {
					nr.Error = err.Error()
				} else {
					nr.Handlers, nr.Listed = names, slices.Contains(names, handler)
				}
				res.Node = nr
			}
			if pods {
				// Whether or not the handler is still loaded: a sandbox
				// outlives its handler's removal from the configuration.
				asked := []string{handler}
				if len(podHandlers) > 0 {
					// A removal guard asks for exactly the handlers it
					// takes away: a custom runtime's, not its base's.
					asked = podHandlers
				}
				ps, err := ep.RunningPods(cmd.Context(), asked, timeout)
				if err != nil {
					res.PodsError = err.Error()
				}
				res.Pods = ps
			}
			if sandbox && res.Live {
				sb, err := proveSandbox(cmd.Context(), g, p, ep, res, sandboxTimeout)
				if err != nil {
					return errdefs.Failed(err)
				}
				res.Sandbox = sb
			}
			if snapshotter && res.Live && res.Found.Snapshotter != "" {
				sr := &snapshotterResult{Name: res.Found.Snapshotter, Live: true}
				if err := ep.ProveSnapshotter(cmd.Context(), sr.Name, timeout); err != nil {
					sr.Live, sr.Error = false, err.Error()
				}
				res.Snapshotter = sr
			}
			if err := output.Render(g.Stdout(), format, res, func(w io.Writer) error { return writeVerify(w, res, qerr) }); err != nil {
				return err
			}
			switch {
			case qerr != nil:
				return errdefs.Failed(qerr)
			case !res.Live:
				return errdefs.NotFound(errors.New(""))
			case res.Node != nil && res.Node.Error != "":
				return errdefs.NotReady(errors.New(res.Node.Error))
			case res.Node != nil && !res.Node.Listed:
				return errdefs.NotReady(errors.New(""))
			case res.Sandbox != nil && res.Sandbox.Outcome == cri.SandboxFail:
				return errdefs.NotReady(errors.New(""))
			case res.Snapshotter != nil && !res.Snapshotter.Live:
				return errdefs.NotReady(errors.New(""))
			}
			for _, u := range res.Unfinished {
				if u.Handler == handler {
					return errdefs.NotReady(fmt.Errorf("the change of %s is unfinished: run %s", handler, u.Command()))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&plat, "platform", "p", "", "platform whose handler to look for")
	cli.AddSuffixFlag(cmd, &suffixFlag)
	f.StringVar(&socket, "socket", "", "CRI socket (default: the distribution's, under --root)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "also check Node.status.runtimeHandlers through this kubeconfig")
	f.StringVar(&node, "node", "", "node name for --kubeconfig (default: the host name)")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the runtime")
	f.BoolVar(&sandbox, "sandbox", false, "also start, stop and remove a pod sandbox with the handler (skipped where its VM cannot run)")
	f.BoolVar(&pods, "pods", false, "also list the pods running on the handler on this node (ready sandboxes with it, over CRI)")
	f.StringSliceVar(&podHandlers, "pods-handler", nil, "with --pods: list the pods of these handlers (on the platform's runtime) instead of the platform's own, e.g. a custom runtime's")
	_ = f.MarkHidden("pods-handler")
	f.BoolVar(&snapshotter, "snapshotter", false, "also prove the handler's snapshotter over containerd's introspection and a probe snapshot")
	f.DurationVar(&sandboxTimeout, "sandbox-timeout", 2*time.Minute, "how long the sandbox may take to start")
	cli.Positive(cmd, "timeout", "sandbox-timeout")
	return cmd
}

// proveSandbox decides from the host's facts (discovered once, here)
// whether the handler's sandbox can run on this node, and if so starts it.
func proveSandbox(ctx context.Context, g *cli.Globals, p platform.Platform, ep cri.Endpoint, res verifyResult, timeout time.Duration) (*cri.SandboxResult, error) {
	root, cleanup, err := g.OpenRoot()
	defer cleanup()
	if err != nil {
		return nil, err
	}
	f := discover.Run(ctx, root, g.DiscoverOptions(false))
	if reason := cri.SkipReason(p, res.Found.RuntimeType, f); reason != "" {
		return &cri.SandboxResult{Handler: res.Handler, Outcome: cri.SandboxSkip, Reason: reason}, nil
	}
	logs, err := cri.TempLogDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(logs)
	sb, err := ep.ProveSandbox(ctx, res.Handler, logs, timeout)
	if err != nil {
		return nil, err
	}
	return &sb, nil
}

func writeVerify(w io.Writer, r verifyResult, qerr error) error {
	if err := writeRuntimeVerify(w, r, qerr); err != nil {
		return err
	}
	if sb := r.Sandbox; sb != nil {
		switch sb.Outcome {
		case cri.SandboxPass:
			fmt.Fprintf(w, "sandbox %s: started, stopped and removed in %.1fs\n", r.Handler, sb.Duration)
		case cri.SandboxSkip:
			fmt.Fprintf(w, "sandbox %s: SKIP (not proven): %s\n", r.Handler, sb.Reason)
		default:
			fmt.Fprintf(w, "sandbox %s: FAILED after %.1fs: %s\n", r.Handler, sb.Duration, sb.Error)
			if sb.Cleanup != "" {
				fmt.Fprintf(w, "  not cleaned up (look for pod sandboxes labelled %s): %s\n", cri.LabelKey, sb.Cleanup)
			}
		}
	}
	if sn := r.Snapshotter; sn != nil {
		if sn.Live {
			fmt.Fprintf(w, "snapshotter %s: loaded in containerd and answering\n", sn.Name)
		} else {
			fmt.Fprintf(w, "snapshotter %s: NOT proven: %s\n", sn.Name, sn.Error)
		}
	}
	if r.PodsError != "" {
		fmt.Fprintf(w, "pods on %s: unknown: %s\n", r.Handler, r.PodsError)
	} else if r.Pods != nil {
		fmt.Fprintf(w, "pods on %s: %d running", r.Handler, len(r.Pods))
		if len(r.Pods) > 0 {
			fmt.Fprintf(w, ": %s", podguard.Names(r.Pods))
		}
		fmt.Fprintln(w)
	}
	for _, u := range r.Unfinished {
		fmt.Fprintf(w, "unfinished: %s\n  complete it: %s\n", u.Describe(), u.Command())
	}
	if n := r.Node; n != nil {
		switch {
		case n.Error != "":
			fmt.Fprintf(w, "node %s: unknown: %s\n", n.Name, n.Error)
		case n.Listed:
			fmt.Fprintf(w, "node %s: lists %s in status.runtimeHandlers\n", n.Name, r.Handler)
		default:
			fmt.Fprintf(w, "node %s: does NOT list %s in status.runtimeHandlers (has: %s); the kubelet refreshes it after the runtime restarts\n",
				n.Name, r.Handler, strings.Join(n.Handlers, ", "))
		}
	}
	return nil
}

func writeRuntimeVerify(w io.Writer, r verifyResult, qerr error) error {
	if qerr != nil {
		_, err := fmt.Fprintf(w, "handler %s: unknown: the runtime at %s could not be asked\n", r.Handler, r.Socket)
		return err
	}
	if !r.Live {
		_, err := fmt.Fprintf(w, "handler %s: NOT live in %s %s (%s)\n  the runtime has: %s\n  run berth config apply --platform %s --restart\n",
			r.Handler, r.RuntimeName, r.RuntimeVersion, r.Socket, strings.Join(r.Handlers, ", "), r.Platform)
		return err
	}
	h := r.Found
	fmt.Fprintf(w, "handler %s: live in %s %s (%s)\n", r.Handler, r.RuntimeName, r.RuntimeVersion, r.Socket)
	if h.RuntimeType != "" {
		fmt.Fprintf(w, "  runtime type  %s\n", h.RuntimeType)
	}
	if h.RuntimePath != "" {
		fmt.Fprintf(w, "  runtime path  %s\n", h.RuntimePath)
	}
	if h.Snapshotter != "" {
		fmt.Fprintf(w, "  snapshotter   %s\n", h.Snapshotter)
	}
	if cp, ok := h.Options["ConfigPath"].(string); ok {
		fmt.Fprintf(w, "  config        %s\n", cp)
	}
	return nil
}
