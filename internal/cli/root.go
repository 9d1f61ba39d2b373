package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/present/output"
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
	verify func(ctx context.Context, g *Globals, p platform.Platform, suffix configure.Suffix, extra ...string) error
	// network makes check --network's probe (Wiring.Network).
	network NetworkFunc
	// delegateTo is the binary berth runs for what it lacks (Delegate).
	delegateTo string
	// installedBoot reads an installation (Wiring.InstalledBoot).
	installedBoot InstalledBootFunc
	// writable is --root opened for writing (Writable), nil until then.
	writable *hostfs.Writable
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

func newRootCmd(e *env, w Wiring) (*cobra.Command, *Globals) {
	g := &Globals{env: *e, verify: w.Verify, network: w.Network, delegateTo: w.delegateTo, installedBoot: w.InstalledBoot}
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
			if g.root == "" {
				// An unset variable in a script (--root "$ROOT") must not
				// mean this machine's own root.
				return UsageErr(errors.New("--root: an empty path (name / for this machine's root)"))
			}
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

	addCommands(cmd, g, append(hostCommands(), w.Commands...), e.args)
	return cmd, g
}

// Command is a top-level command: its name, the first word of the Use of
// what New builds (TestCommandNames), and its constructor.
type Command struct {
	Name string
	New  func(*Globals) *cobra.Command
}

// hostCommands are the commands of both binaries.
func hostCommands() []Command {
	return []Command{
		{"version", newVersionCmd},
		{"facts", newFactsCmd},
		{"snapshot", newSnapshotCmd},
		{"refvalues", newRefvaluesCmd},
		{"check", newCheckCmd},
		{"platforms", newPlatformsCmd},
		{"manifest", newManifestCmd},
		{"config", newConfigCmd},
		{"migrate", newMigrateCmd},
	}
}

// addCommands adds to root the command that args run, or every command
// when args name none of them: help, completion, a mistyped or missing
// command list or search them all.
//
// Building a command builds its flags, and pflag renders each list flag's
// default through encoding/csv: building all took a quarter of a
// millisecond, more than berth version's own work. Which command args
// name is cobra's own Find, over a tree of bare commands that carry only
// the names, so flags before the command are skipped as cobra skips them.
func addCommands(root *cobra.Command, g *Globals, cmds []Command, args []string) {
	bare := make([]*cobra.Command, len(cmds))
	for i, c := range cmds {
		bare[i] = &cobra.Command{Use: c.Name}
	}
	root.AddCommand(bare...)
	target, _, err := root.Find(args)
	root.RemoveCommand(bare...)
	one := err == nil && target != root
	// cobra builds its completion command on every run; only a run that
	// names none of berth's commands can be asking for it.
	root.CompletionOptions.DisableDefaultCmd = one
	for i, c := range cmds {
		if one && target != bare[i] {
			continue
		}
		sub := c.New(g)
		markRun(sub)
		root.AddCommand(sub)
	}
}

// NoArgs rejects positional arguments with a usage error.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return UsageErr(fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args))
	}
	return nil
}
