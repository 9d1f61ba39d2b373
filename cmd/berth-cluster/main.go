// Command berth-cluster is berth with the commands that talk to a Kubernetes
// API server or a CRI socket: agent (the DaemonSet), node-installer, fleet, verify and
// runtimeclasses, besides every host command. berth runs it for those
// commands; the agent's image ships it as /berth.
package main

import (
	"os"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/cli/clustercmd"
)

func main() {
	w := clustercmd.Wiring()
	w.Exits = true
	os.Exit(cli.Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv, w))
}
