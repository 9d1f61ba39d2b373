// Command berth tells whether a node can run sandboxed and confidential
// containers, on which platform, and if not why; then configures and installs
// what the chosen platform needs. This package only wires flags and
// commands to the internal packages and maps errors to exit codes.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Exit codes, documented in the README.
const (
	exitOK       = 0
	exitNotReady = 1
	exitUsage    = 2
)

// exitError carries a specific exit code up to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as a usage or input error (exit 2).
func usageErr(err error) error { return &exitError{code: exitUsage, err: err} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// run executes the CLI and returns the process exit code; tests call it
// directly with their own streams and environment.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	cmd := newRootCmd(&env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv})
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
