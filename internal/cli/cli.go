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

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/discover"
	"berth.dev/berth/internal/hostfs"
	"berth.dev/berth/internal/output"
	"berth.dev/berth/platform"
)

// Exit codes, documented in the README.
const (
	exitOK       = 0
	exitNotReady = 1
	exitUsage    = 2
)

// ExitNotReady is the exit code of a command whose platform or node is not
// ready (1); ExitUsage that of a usage or input error (2).
const (
	ExitNotReady = exitNotReady
	ExitUsage    = exitUsage
)

// exitError carries a specific exit code up to Run.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as a usage or input error (exit 2).
func usageErr(err error) error { return &exitError{code: exitUsage, err: err} }

// UsageErr marks err as a usage or input error: Run exits 2.
func UsageErr(err error) error { return usageErr(err) }

// ExitErr makes Run exit with code after printing err (nothing when err's
// text is empty: the command already said why).
func ExitErr(code int, err error) error { return &exitError{code: code, err: err} }

// Wiring is what a binary adds to the shared command tree.
type Wiring struct {
	// Commands are added to the root command.
	Commands []func(*Globals) *cobra.Command
	// Verify runs `verify --platform p`, as install does after installing
	// on a live root; nil when the binary cannot verify.
	Verify func(ctx context.Context, g *Globals, p platform.Platform) error
}

// Run executes the CLI with args and returns the process exit code; tests
// call it directly with their own streams and environment.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string, w Wiring) int {
	cmd := newRootCmd(&env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, args: args}, w)
	cmd.SetArgs(args)
	err := cmd.Execute()
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, "Error:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "Error:", err)
	return exitUsage
}

// NoArgs rejects positional arguments with a usage error.
func NoArgs(cmd *cobra.Command, args []string) error { return noArgs(cmd, args) }

// ParsePlatformFlag parses a required --platform value (exit 2 when bad).
func ParsePlatformFlag(s string) (platform.Platform, error) { return parsePlatformFlag(s) }

// Stdout is where commands write their results.
func (g *Globals) Stdout() io.Writer { return g.stdout }

// Stderr is where commands write logs and errors.
func (g *Globals) Stderr() io.Writer { return g.stderr }

// Getenv reads the process environment (a test's own in tests).
func (g *Globals) Getenv(key string) string { return g.getenv(key) }

// Format parses -o against the formats a command allows (exit 2 when bad).
func (g *Globals) Format(allowed ...output.Format) (output.Format, error) {
	return g.format(allowed...)
}

// Output is the -o value as given.
func (g *Globals) Output() string { return g.output }

// Root is the --root value as given.
func (g *Globals) Root() string { return g.root }

// Verbose is the -v count.
func (g *Globals) Verbose() int { return g.verbose }

// OpenRoot opens --root (with --live); close releases it.
func (g *Globals) OpenRoot() (root hostfs.Root, close func(), err error) { return g.openRoot() }

// DiscoverOptions are the discovery options the global flags imply.
func (g *Globals) DiscoverOptions(probe bool) discover.Options { return g.discoverOptions(probe) }
