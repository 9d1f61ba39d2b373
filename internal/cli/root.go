package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/output"
	"berth.dev/berth/platform"
)

// env is what the process gives the CLI; tests supply their own.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// args are the command line as given, for commands that hand it on
	// to berth-cluster.
	args []string
	// life holds the cleanups Run performs however the run ends (nil:
	// only the commands' own deferred cleanups).
	life *lifecycle
}

// Globals holds the flags every command shares.
type Globals struct {
	env
	output  string
	root    string
	live    bool
	verbose int
	noColor bool
	log     *slog.Logger
	// verify runs `verify --platform p` for install (Wiring.Verify).
	verify func(ctx context.Context, g *Globals, p platform.Platform) error
	// network makes check --network's probe (Wiring.Network).
	network NetworkFunc
	// delegateTo is the binary berth runs for what it lacks (Delegate).
	delegateTo string
}

// Format parses -o against the formats a command allows (exit 2 when bad).
func (g *Globals) Format(allowed ...output.Format) (output.Format, error) {
	f, err := output.ParseFormat(g.output, allowed...)
	if err != nil {
		return "", UsageErr(err)
	}
	return f, nil
}

func (g *Globals) color() bool { return output.ColorEnabled(g.stdout, g.noColor, g.getenv) }

func newRootCmd(e *env, w Wiring) *cobra.Command {
	g := &Globals{env: *e, verify: w.Verify, network: w.Network, delegateTo: w.delegateTo}
	cmd := &cobra.Command{
		Use:   "berth",
		Short: "Can this node run sandboxed and confidential containers, and on which platform?",
		Long: `berth discovers what a host has, evaluates it against sandboxed and
confidential-container platforms (Kata Containers, Confidential Containers,
Contrast), explains every blocker with a remedy, and configures and installs
only what the chosen platform needs.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			switch {
			case g.verbose >= 2:
				level = slog.LevelDebug
			case g.verbose == 1:
				level = slog.LevelInfo
			}
			g.log = slog.New(slog.NewTextHandler(g.stderr, &slog.HandlerOptions{Level: level}))
			return nil
		},
	}
	cmd.SetIn(e.stdin)
	cmd.SetOut(e.stdout)
	cmd.SetErr(e.stderr)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageErr(err) })
	pf := cmd.PersistentFlags()
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	pf.StringVar(&g.root, "root", "/", "host root to inspect: a directory or a snapshot .tar.gz")
	pf.BoolVar(&g.live, "live", false, "the --root directory is a running host mounted there (as /host in the DaemonSet): run its binaries chrooted into it")
	pf.CountVarP(&g.verbose, "verbose", "v", "log more (-v info, -vv debug) to stderr")
	pf.BoolVar(&g.noColor, "no-color", false, "never colour the output (NO_COLOR is honoured too)")

	cmd.AddCommand(newVersionCmd(g))
	cmd.AddCommand(newFactsCmd(g))
	cmd.AddCommand(newSnapshotCmd(g))
	cmd.AddCommand(newRefvaluesCmd(g))
	cmd.AddCommand(newCheckCmd(g))
	cmd.AddCommand(newPlatformsCmd(g))
	cmd.AddCommand(newManifestCmd(g))
	cmd.AddCommand(newConfigCmd(g))
	for _, c := range w.Commands {
		cmd.AddCommand(c(g))
	}
	return cmd
}

// NoArgs rejects positional arguments with a usage error.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return UsageErr(fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args))
	}
	return nil
}
