package cli

import "io"

// run is berth as the tests see it: the host commands, with the cluster
// commands delegated to berth-cluster.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	return Run(args, stdin, stdout, stderr, getenv, Delegate("berth-cluster"))
}
