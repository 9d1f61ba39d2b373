// Package cli is berth's command tree: flags, commands and exit codes wired
// to the internal packages. It is shared by two binaries: berth, the host
// commands, and berth-cluster, which adds the commands that talk to a
// Kubernetes API server or a CRI socket (package clustercmd). Keeping
// client-go and gRPC out of berth keeps its start-up and memory small,
// which the host commands' budgets need (README, "Two binaries").
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// Exit codes, documented in the README; errdefs.ExitCode maps errors to
// them.
const (
	// ExitOK: success.
	ExitOK = errdefs.ExitOK
	// ExitNotReady: a platform or node is not ready, a change refused or
	// failed: any error after the flags were validated.
	ExitNotReady = errdefs.ExitFailure
	// ExitUsage: a usage or input error.
	ExitUsage = errdefs.ExitUsage
)

// UsageErr marks err as a usage or input error: Run exits 2.
func UsageErr(err error) error { return errdefs.Usage(err) }

// ExitErr makes Run exit with code after printing err (nothing when err's
// text is empty: the command already said why). It is for a status
// decided elsewhere (a delegated berth-cluster's); a command's own errors
// take their code from their class (errdefs).
func ExitErr(code int, err error) error { return &errdefs.StatusError{Code: code, Err: err} }

// ranError is an error a command's RunE returned: one that was not
// returned before the command ran, by cobra itself (an unknown command, a
// flag cobra rejects), which is always a usage error.
type ranError struct{ err error }

func (e *ranError) Error() string { return e.err.Error() }
func (e *ranError) Unwrap() error { return e.err }

// markRun makes the errors cmd's RunE and its subcommands' return
// ranErrors, so that Run can tell them from cobra's own, and checks the
// numeric flags' bounds (Positive, NonNegative) before each runs: a bound
// broken is cobra's kind of error, a usage error.
func markRun(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if err := checkFlagBounds(c); err != nil {
				return err
			}
			if err := run(c, args); err != nil {
				return &ranError{err}
			}
			return nil
		}
	}
	for _, c := range cmd.Commands() {
		markRun(c)
	}
}

// exitCode is the exit status of a command that returned err: an error
// cobra returned before the command ran is a usage error; the command's
// own take their status from their class (errdefs.ExitCode: 2 for usage,
// 1 for anything else).
func exitCode(err error) int {
	if err != nil && !errors.As(err, new(*ranError)) && errdefs.Class(err) == nil {
		return ExitUsage
	}
	return errdefs.ExitCode(err)
}

// Wiring is what a binary adds to the shared command tree.
type Wiring struct {
	// Commands are added to the root command, after the host commands.
	Commands []Command
	// Verify runs `verify --platform p --install-suffix suffix` and the
	// extra flags, as install does after installing on a live root (and
	// the removal guards with --pods); nil when the binary cannot verify.
	Verify func(ctx context.Context, g *Globals, p platform.Platform, suffix configure.Suffix, extra ...string) error
	// Network makes check --network's probe; nil when the binary links no
	// HTTP client (berth), which then runs delegateTo for check --network.
	Network NetworkFunc
	// InstalledBoot reads an installation for refvalues --installed; nil
	// when the binary links no installer (berth), which then runs
	// delegateTo for it.
	InstalledBoot InstalledBootFunc
	// ForceAfter replaces defaultForceAfter (tests); zero keeps it.
	ForceAfter time.Duration
	// Exits says the process exits as soon as Run returns (main): the
	// signal subscriptions are then left in place rather than given up,
	// which waits for os/signal's goroutine. Tests, which run many
	// commands in one process, leave it false.
	Exits bool

	delegateTo string
	// notify replaces the signal subscription (tests count them).
	notify func(*signals)
}

// NetworkFunc makes discovery's network probe for check --network: the
// registries and attestation services given, each probe bounded by
// timeout. An error is about the flags' values (exit 2).
type NetworkFunc func(timeout time.Duration, registries, attestation []string) (*discover.NetworkProbe, error)

// Run executes the CLI with args and returns the process exit code; tests
// call it directly with their own streams and environment.
//
// The command runs under a context that SIGINT and SIGTERM cancel; what it
// created that must not outlive it (an unpacked snapshot) is removed
// however the run ends. A command cut short by a signal exits 130
// (SIGINT) or 143 (SIGTERM), quietly; one that stops cleanly on the
// signal (returns nil, like the agent) exits 0. A write to a closed stdout
// (berth ... | head) ends the run quietly with 141 after the same cleanup,
// as a Unix tool killed by SIGPIPE would end, but clean. A command that
// only reads and prints (AnnotationEarlyStart) subscribes to the signals
// only once it has something to undo: until then a signal ends it as it
// ends any process, which a shell reports with the same codes.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, w Wiring) int {
	sigs := newSignals()
	if w.notify != nil {
		sigs.notify = w.notify
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	life := newLifecycle(ctx, testForceAfter(getenv, w.ForceAfter))
	life.sigs = sigs
	// Every write to stdout is checked, those whose error a command
	// drops included: a result not written fails the run.
	out := output.NewChecked(stdout)
	cmd, g := newRootCmd(&env{stdin: stdin, stdout: out, stderr: stderr, getenv: getenv, args: args, life: life}, w)
	cmd.SetArgs(args)
	var c guard
	if target, _, err := cmd.Find(args); err == nil {
		c = guard{ownSignals: target.Annotations[AnnotationOwnSignals] != "", early: target.Annotations[AnnotationEarlyStart] != ""}
	}
	err, sig, forced := runGuarded(life, cancel, c, sigs, w.Exits, func() error { defer g.closeWritable(); return cmd.ExecuteContext(ctx) })
	if werr := out.Err(); err == nil && werr != nil {
		err = &ranError{fmt.Errorf("writing the result to stdout: %w", werr)}
	}
	switch {
	case sig != 0 && (forced || err != nil):
		return 128 + int(sig)
	case err == nil:
		return ExitOK
	case isBrokenPipe(err):
		return ExitBrokenPipe
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(stderr, "Error:", output.EscapeText(msg))
	}
	return exitCode(err)
}

// interrupted is the error of a command whose context a signal cancelled
// (nil while it runs on): commands check it after their long work, so
// that an interrupted run does not print or publish partial results.
func interrupted(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// Stdout is where commands write their results.
func (g *Globals) Stdout() io.Writer { return g.stdout }

// Stderr is where commands write logs and errors.
func (g *Globals) Stderr() io.Writer { return g.stderr }

// Getenv reads the process environment (a test's own in tests).
func (g *Globals) Getenv(key string) string { return g.getenv(key) }

// Output is the -o value as given.
func (g *Globals) Output() string { return g.output }

// Root is the --root value as given.
func (g *Globals) Root() string { return g.root }

// Verbose is the -v count.
func (g *Globals) Verbose() int { return g.verbose }

// Log is the command's logger (stderr, at the level -v asked for).
func (g *Globals) Log() *slog.Logger { return g.log }

// WithStdout is a copy of g whose standard output is w: install's prose
// goes to stderr when stdout carries JSON.
func (g *Globals) WithStdout(w io.Writer) *Globals {
	c := *g
	c.stdout = w
	return &c
}
