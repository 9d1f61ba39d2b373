// Command berth tells whether a node can run sandboxed and confidential
// containers, on which platform, and if not why; then configures and installs
// what the chosen platform needs. The commands that talk to Kubernetes or a
// CRI socket (agent, node-installer, fleet, verify, runtimeclasses) live in berth-cluster,
// which berth runs for them, so that the host commands start without
// client-go and gRPC (README, "Two binaries").
package main

import (
	"os"

	"berth.dev/berth/internal/cli"
)

func main() {
	w := cli.Delegate("berth-cluster")
	w.Exits = true
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv, w))
}
