// Package unixsock is a unix socket listener for tests that must know
// whether code under test connected to a path: the proof that berth
// reached the socket in a host root and never one outside it.
package unixsock

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// Accepts listens on the unix socket p (making its directory) until the
// test ends and sends on the returned channel once per connection, which
// it closes at once.
func Accepts(t testing.TB, p string) <-chan struct{} {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got := make(chan struct{}, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			got <- struct{}{}
			c.Close()
		}
	}()
	return got
}
