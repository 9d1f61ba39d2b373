// Package clustercmd holds the commands that talk to a Kubernetes API server
// or a CRI socket: agent, node-installer, fleet, verify and runtimeclasses. Only the
// berth-cluster binary links it, so that berth's host commands start without
// client-go and gRPC.
package clustercmd

import (
	"context"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/platform"
)

// Wiring adds the cluster commands to the shared command tree and lets
// install verify in-process.
func Wiring() cli.Wiring {
	return cli.Wiring{
		Commands: []func(*cli.Globals) *cobra.Command{newAgentCmd, newFleetCmd, newNodeInstallerCmd, newRuntimeClassesCmd, newVerifyCmd},
		Verify: func(ctx context.Context, g *cli.Globals, p platform.Platform) error {
			v := newVerifyCmd(g)
			v.SetArgs([]string{"--platform", p.String()})
			v.SetOut(g.Stdout())
			v.SetErr(g.Stderr())
			return v.ExecuteContext(ctx)
		},
	}
}
