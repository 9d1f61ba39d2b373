package clustercmd

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/cli"
)

// TestNumericFlagBounds: a numeric or duration flag that makes no sense at
// zero or below is a usage error naming the flag, found before the command
// does anything (no cluster, no host is touched).
func TestNumericFlagBounds(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "-p", "kata-qemu", "-m", "m.yaml", "--parallel", "-1"}, "--parallel -1: expected at least 1"},
		{[]string{"install", "-p", "kata-qemu", "-m", "m.yaml", "--parallel", "0"}, "--parallel 0: expected at least 1"},
		{[]string{"node-installer", "-p", "kata-qemu", "--parallel", "-1"}, "--parallel -1: expected at least 1"},
		{[]string{"node-installer", "-p", "kata-qemu", "--sandbox-timeout", "0s"}, "--sandbox-timeout 0s: expected a positive duration"},
		{[]string{"node-installer", "dispatch", "--timeout", "-1s"}, "--timeout -1s: expected a positive duration"},
		{[]string{"node-installer", "teardown", "--timeout", "0s"}, "--timeout 0s: expected a positive duration"},
		{[]string{"verify", "-p", "kata-qemu", "--timeout", "0s"}, "--timeout 0s: expected a positive duration"},
		{[]string{"verify", "-p", "kata-qemu", "--sandbox-timeout", "-1m"}, "--sandbox-timeout -1m0s: expected a positive duration"},
		{[]string{"agent", "--backoff-max", "0s"}, "--backoff-max 0s: expected a positive duration"},
		{[]string{"check", "-o", "nfd", "--nfd-expiry", "-24h"}, "--nfd-expiry -24h0m0s: expected a duration of 0 (none) or more"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(t, tc.args...)
			if code != cli.ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d saying %q", code, errOut, cli.ExitUsage, tc.want)
			}
		})
	}
}
