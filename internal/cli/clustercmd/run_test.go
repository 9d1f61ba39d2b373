package clustercmd

import (
	"bytes"
	"strings"
	"testing"

	"berth.dev/berth/internal/cli"
)

// runCLI runs berth-cluster in-process with a clean environment.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(args, strings.NewReader(""), &out, &errb, func(string) string { return "" }, Wiring())
	return code, out.String(), errb.String()
}

// TestCommandNames holds each added Command's Name to what its constructor
// builds (cli's own test does the host commands).
func TestCommandNames(t *testing.T) {
	for _, c := range Wiring().Commands {
		if got := c.New(&cli.Globals{}).Name(); got != c.Name {
			t.Errorf("Command %q builds %q", c.Name, got)
		}
	}
}
