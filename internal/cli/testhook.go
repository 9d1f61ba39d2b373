//go:build !berthtest

package cli

// afterOpenRoot is a test hook (build tag berthtest): the real binary
// does nothing here.
func afterOpenRoot(*Globals, string) {}
