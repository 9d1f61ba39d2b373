// Package clustercmd holds the commands that talk to a Kubernetes API server
// or a CRI socket: agent, node-installer, fleet, verify and runtimeclasses.
// Its Wiring adds install's commands (installcmd) and check --network's
// HTTP probe. Only the berth-cluster binary links it, so that berth's host
// commands start without client-go, gRPC, the HTTP and TLS stack and zstd.
package clustercmd

import (
	"context"
	"fmt"
	"time"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/cli/installcmd"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/netprobe"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/platform"
)

// Wiring adds the cluster commands to the shared command tree and lets
// install verify in-process.
func Wiring() cli.Wiring {
	return cli.Wiring{
		Commands: append([]cli.Command{
			{Name: "agent", New: newAgentCmd},
			{Name: "fleet", New: newFleetCmd},
			{Name: "node-installer", New: newNodeInstallerCmd},
			{Name: "runtimeclasses", New: newRuntimeClassesCmd},
			{Name: "verify", New: newVerifyCmd},
		}, installcmd.Commands()...),
		Network:       networkProbe,
		InstalledBoot: installcmd.InstalledBoot,
		Verify: func(ctx context.Context, g *cli.Globals, p platform.Platform, suffix configure.Suffix, extra ...string) error {
			v := newVerifyCmd(g)
			args := []string{"--platform", p.String()}
			if suffix != "" {
				args = append(args, "--install-suffix", string(suffix))
			}
			if p.Snapshotter().Setup().Proxy != "" {
				// berth's nydus-snapshotter: the handler is no use
				// until the snapshotter it names answers.
				args = append(args, "--snapshotter")
			}
			v.SetArgs(append(args, extra...))
			v.SetOut(g.Stdout())
			v.SetErr(g.Stderr())
			return v.ExecuteContext(ctx)
		},
	}
}

// networkProbe is check --network's probe: netprobe, with the proxy
// settings containerd's pulls use.
func networkProbe(timeout time.Duration, registries, attestation []string) (*discover.NetworkProbe, error) {
	var targets []netprobe.Target
	for _, r := range registries {
		u, err := netprobe.RegistryURL(r)
		if err != nil {
			return nil, fmt.Errorf("--registry: %w", err)
		}
		targets = append(targets, netprobe.Target{Role: netprobe.RoleRegistry, URL: u})
	}
	for _, a := range attestation {
		u, err := netprobe.ServiceURL(a)
		if err != nil {
			return nil, fmt.Errorf("--attestation-url: %w", err)
		}
		targets = append(targets, netprobe.Target{Role: netprobe.RoleAttestation, URL: u})
	}
	p := netprobe.Prober{Client: netprobe.NewClient(), Timeout: timeout}
	return &discover.NetworkProbe{
		Probe:   func(ctx context.Context) []facts.Endpoint { return p.ProbeAll(ctx, targets) },
		Timeout: timeout,
	}, nil
}
