// Command berth tells whether a node can run sandboxed and confidential
// containers, on which platform, and if not why; then configures and installs
// what the chosen platform needs. The commands that talk to Kubernetes or a
// CRI socket (agent, node-installer, fleet, verify, runtimeclasses) live in berth-cluster,
// which berth runs for them, so that the host commands start without
// client-go and gRPC (README, "Two binaries").
package main

import (
	"os"
	"runtime/debug"

	"berth.dev/berth/internal/cli"
)

func main() {
	// berth's commands run once and allocate a few megabytes (check --all
	// 4 MB, facts of a 4,096-function host 12 MB): a collection in their
	// 20-150 ms frees little and stops both cores. 400 lets the heap grow
	// to five times what is live before one; GOGC in the environment
	// still decides. (berth-cluster keeps Go's default: its agent runs for
	// days.)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	w := cli.Delegate("berth-cluster")
	w.Exits = true
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv, w))
}
