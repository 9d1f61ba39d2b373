// Package testkit holds what every kind of test support shares: the one
// rule for which tests `go test -short` (make test-short) leaves out.
//
// The full suite (make test, as root, after .ci/tools.sh) runs everything
// and fails loudly when a tool or root is missing. Under -short, and only
// then, a test that needs a tool .ci/tools.sh installs or builds (a real
// containerd, kube-apiserver and etcd, a kubelet, QEMU, Helm,
// nydus-snapshotter, Chromium, the Debian kernel) skips, whether or not
// the tool happens to be there, and a test that needs root skips when it
// does not run as root: the short run needs nothing but Go.
package testkit

import (
	"os"
	"testing"
)

// NeedsTools marks a test that needs what, one of the tools .ci/tools.sh
// provides: under -short it skips the test, otherwise it does nothing (the
// test then fails loudly where the tool is missing). Call it first, before
// the test looks for the tool.
func NeedsTools(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s (from .ci/tools.sh): left out by -short; make test runs it", what)
	}
}

// NeedsRoot marks a test that needs root for why (mknod, mount, files
// owned by root): without root it fails the test, except under -short,
// where it skips it. As root the test runs under -short too: it needs no
// tool, only the privilege.
func NeedsRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if testing.Short() {
		t.Skipf("needs root (%s): left out by -short without root; make test runs it as root", why)
	}
	t.Fatalf("%s needs root: run the suite as root (as CI does)", why)
}
