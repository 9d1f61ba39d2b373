// Command pause is the sandbox ("pause") container of the test node of
// internal/testkit/testnode: the tests cannot pull registry.k8s.io/pause, so they
// build this into an image and pin it as containerd's sandbox image. Like
// the real one it holds the pod's namespaces open by sleeping until it is
// told to stop, and reaps the zombies it inherits when it is the pod's
// init (shareProcessNamespace).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
