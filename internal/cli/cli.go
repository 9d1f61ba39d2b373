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

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// Exit codes, documented in the README.
const (
	// ExitOK: success.
	ExitOK = 0
	// ExitNotReady: a platform or node is not ready.
	ExitNotReady = 1
	// ExitUsage: a usage or input error.
	ExitUsage = 2
)

// exitError carries a specific exit code up to Run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// UsageErr marks err as a usage or input error: Run exits 2.
func UsageErr(err error) error { return &exitError{code: ExitUsage, err: err} }

// ExitErr makes Run exit with code after printing err (nothing when err's
// text is empty: the command already said why).
func ExitErr(code int, err error) error { return &exitError{code: code, err: err} }

// Wiring is what a binary adds to the shared command tree.
type Wiring struct {
	// Commands are added to the root command, after the host commands.
	Commands []Command
	// Verify runs `verify --platform p --install-suffix suffix`, as
	// install does after installing on a live root; nil when the binary
	// cannot verify.
	Verify func(ctx context.Context, g *Globals, p platform.Platform, suffix configure.Suffix) error
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
	cmd, g := newRootCmd(&env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, args: args, life: life}, w)
	cmd.SetArgs(args)
	var c guard
	if target, _, err := cmd.Find(args); err == nil {
		c = guard{ownSignals: target.Annotations[AnnotationOwnSignals] != "", early: target.Annotations[AnnotationEarlyStart] != ""}
	}
	err, sig, forced := runGuarded(life, cancel, c, sigs, w.Exits, func() error { defer g.closeWritable(); return cmd.ExecuteContext(ctx) })
	switch {
	case sig != 0 && (forced || err != nil):
		return 128 + int(sig)
	case err == nil:
		return ExitOK
	case isBrokenPipe(err):
		return ExitBrokenPipe
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "Error:", output.EscapeText(ee.err.Error()))
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "Error:", output.EscapeText(err.Error()))
	return ExitUsage
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
