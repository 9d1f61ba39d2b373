// Command failshim stands in for Kata's containerd-shim-kata-v2 in the
// real-node test (internal/cluster/e2e): the release the test serves installs it
// where the shim goes, so that a pod of the platform's RuntimeClass makes
// containerd run it. It records each invocation (its arguments, one line)
// in the file the test names at build time and fails, as Kata's shim
// fails where no VM can boot: the test then knows the sandbox creation
// reached the installed shim. Built with a root (BuildConfigShim), it also
// records what containerd handed it: the runtime options' ConfigPath and
// the Kata configuration there merged with its config.d drop-ins, as
// Kata's runtime would read it (config.go). While the file marker+OKSuffix
// exists it serves instead of failing (ok.go): a pod sandbox then runs on
// the handler without a VM. Kata's own shim cannot be used: its release
// is on GitHub and its Go module is not served by the module proxy.
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// marker is set with -ldflags "-X main.marker=PATH".
var marker string

// Message starts what the shim prints before it fails; containerd passes
// it on in the sandbox creation's error, which the kubelet puts in the
// pod's Event.
const Message = "berth-e2e-shim: invoked by containerd; no VM can boot here"

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case serveCommand:
			if len(os.Args) != 4 {
				fail(fmt.Errorf("usage: %s SOCKET CONTAINERD-ADDRESS", serveCommand))
			}
			serve(os.Args[2], os.Args[3])
			return
		case sleepCommand:
			sleep()
			return
		}
	}
	if marker != "" {
		if f, err := os.OpenFile(marker, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(f, strings.Join(os.Args[1:], " "))
			if root != "" && slices.Contains(os.Args[1:], "start") {
				record(f, given(os.Stdin))
			}
			f.Close()
		}
	}
	if okMode() {
		runOK(os.Args[1:])
	}
	fmt.Fprintf(os.Stderr, "%s (args %q)\n", Message, os.Args[1:])
	os.Exit(1)
}
