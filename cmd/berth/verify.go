package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/cri"
	"berth.dev/berth/internal/output"
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
}

func newVerifyCmd(g *globals) *cobra.Command {
	var plat, socket string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "verify --platform P",
		Short: "Ask the running container runtime whether the platform's handler is live",
		Long: `verify asks the container runtime over its CRI socket (CRI Status, verbose)
whether the platform's runtime handler is loaded: a configuration on disk
proves nothing until the runtime has read it. The socket is the one of the
platform's distribution under --root, unless --socket is given.

Exit status: 0 the handler is live, 1 it is not (or the runtime could not
be asked), 2 usage error. Node.status.runtimeHandlers (asking Kubernetes)
is not checked yet.`,
		Example: `  berth verify --platform kubeadm-qemu-snp
  berth verify -p k3s-qemu-tdx --socket /run/k3s/containerd/containerd.sock -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.format(output.Table, output.JSON, output.YAML)
			if err != nil {
				return err
			}
			p, err := parsePlatformFlag(plat)
			if err != nil {
				return err
			}
			if socket == "" {
				l, ok := p.Distribution().Layout()
				if !ok {
					return usageErr(fmt.Errorf("distribution %s has no known socket: pass --socket", p.Distribution()))
				}
				socket = filepath.Join(g.root, filepath.FromSlash(l.Socket))
			}
			res := verifyResult{Platform: p.String(), Handler: p.Name(), Socket: socket, Handlers: []string{}}
			st, qerr := cri.Query(cmd.Context(), socket, timeout)
			if qerr == nil {
				res.RuntimeName, res.RuntimeVersion = st.RuntimeName, st.RuntimeVersion
				res.Handlers = st.Names()
				if h, ok := st.Handlers[p.Name()]; ok {
					res.Live, res.Found = true, &h
				}
			}
			if err := output.Render(g.stdout, format, res, func(w io.Writer) error { return writeVerify(w, res, qerr) }); err != nil {
				return err
			}
			switch {
			case qerr != nil:
				return &exitError{code: exitNotReady, err: qerr}
			case !res.Live:
				return &exitError{code: exitNotReady, err: errors.New("")}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&plat, "platform", "p", "", "platform whose handler to look for")
	f.StringVar(&socket, "socket", "", "CRI socket (default: the distribution's, under --root)")
	f.DurationVar(&timeout, "timeout", 10*time.Second, "how long to wait for the runtime")
	return cmd
}

func writeVerify(w io.Writer, r verifyResult, qerr error) error {
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
