package installcmd

import (
	"bytes"
	"strings"
	"testing"

	"berth.dev/berth/internal/cli"
)

// fixedEnv pins the clock of berth for reproducible output.
func fixedEnv(k string) string {
	if k == "SOURCE_DATE_EPOCH" {
		return "1767225600" // 2026-01-01T00:00:00Z
	}
	return ""
}

// runCheckCLI runs berth in process with this package's commands, as
// berth-cluster has them; verify runs berth-cluster, as in berth.
func runCheckCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	w := cli.Wiring{Commands: Commands(), Verify: cli.Delegate("berth-cluster").Verify, InstalledBoot: InstalledBoot}
	code := cli.Run(args, strings.NewReader(""), &out, &errb, fixedEnv, w)
	return code, out.String(), errb.String()
}

const hostsDir = "../../../testdata/hosts"
