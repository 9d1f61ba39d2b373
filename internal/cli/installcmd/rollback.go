package installcmd

import (
	"berth.dev/berth/internal/cli"

	"fmt"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/node/install"
)

func newRollbackCmd(g *cli.Globals) *cobra.Command {
	var fl installFlags
	cmd := &cobra.Command{
		Use:   "rollback",
		Short: "Make the previous installation current again",
		Long: `rollback switches <prefix>/current back to the installation berth install
replaced, atomically, and keeps the one it leaves as previous: a second
rollback undoes the first. The runtime configuration names paths through
the prefix's stable links, so it needs no change; restart the runtime's
running sandboxes to pick up the binaries.`,
		Example: `  sudo berth rollback
  sudo berth rollback --prefix /opt/berth`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, l, err := fl.targetLayout(g)
			if err != nil {
				return err
			}
			in := &install.Installer{Layout: l}
			from, to, err := in.Rollback(cmd.Context())
			if err != nil {
				// A refusal (a prefix leaving --root) or a failure:
				// exit 1 either way (errdefs.ExitCode).
				return err
			}
			r, err := in.Layout.ReadRecord(to)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.Stdout(), "%s: current -> versions/%s (%s %s for %v), was %s\n", in.Layout.Dir(), to, r.Manifest, r.Version, r.Platforms, from)
			return nil
		},
	}
	addInstallPathFlags(cmd, &fl)
	return cmd
}
