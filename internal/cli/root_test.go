package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestCommandNames holds each Command's Name to what its constructor
// builds: a wrong name only makes every run build every command, which no
// other test would notice.
func TestCommandNames(t *testing.T) {
	for _, c := range append(hostCommands(), Delegate("berth-cluster").Commands...) {
		if got := c.New(&Globals{}).Name(); got != c.Name {
			t.Errorf("Command %q builds %q", c.Name, got)
		}
	}
}

// TestRunBuildsOnlyItsCommand: a run builds the command its arguments
// name, and every command when they name none (help, completion, a typo).
func TestRunBuildsOnlyItsCommand(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantCode int
		want     []string // the wiring's commands built
	}{
		{[]string{"alpha"}, 0, []string{"alpha"}},
		{[]string{"-o", "json", "--root", "/", "beta", "x"}, 0, []string{"beta"}},
		{[]string{"alpha", "--help"}, 0, []string{"alpha"}},
		{[]string{"beta", "sub"}, 0, []string{"beta"}},
		{nil, 0, []string{"alpha", "beta"}},
		{[]string{"--help"}, 0, []string{"alpha", "beta"}},
		{[]string{"help", "alpha"}, 0, []string{"alpha", "beta"}},
		{[]string{"__complete", "al"}, 0, []string{"alpha", "beta"}},
		{[]string{"completion", "bash"}, 0, []string{"alpha", "beta"}},
		{[]string{"alpah"}, ExitUsage, []string{"alpha", "beta"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var built []string
			cmd := func(name string) Command {
				return Command{Name: name, New: func(*Globals) *cobra.Command {
					built = append(built, name)
					c := &cobra.Command{Use: name, RunE: func(*cobra.Command, []string) error { return nil }}
					c.AddCommand(&cobra.Command{Use: "sub", RunE: func(*cobra.Command, []string) error { return nil }})
					return c
				}}
			}
			w := Wiring{Commands: []Command{cmd("alpha"), cmd("beta")}}
			var out, errb bytes.Buffer
			code := Run(tc.args, strings.NewReader(""), &out, &errb, func(string) string { return "" }, w)
			if code != tc.wantCode || !slices.Equal(built, tc.want) {
				t.Errorf("exit %d (want %d), built %q (want %q); stderr %q", code, tc.wantCode, built, tc.want, errb.String())
			}
		})
	}
}

// TestHelpListsEveryCommand: berth's help, built from every command,
// lists the host commands and the delegated ones.
func TestHelpListsEveryCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, strings.NewReader(""), &out, &errb, func(string) string { return "" }); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	for _, c := range append(hostCommands(), Delegate("berth-cluster").Commands...) {
		if !strings.Contains(out.String(), "\n  "+c.Name+" ") {
			t.Errorf("help does not list %q:\n%s", c.Name, out.String())
		}
	}
}
