package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/install"
)

func newRollbackCmd(g *Globals) *cobra.Command {
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
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := &install.Installer{Layout: g.layout(fl.prefix)}
			from, to, err := in.Rollback(cmd.Context())
			if err != nil {
				return &exitError{code: ExitNotReady, err: err}
			}
			r, err := in.Layout.ReadRecord(to)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s: current -> versions/%s (%s %s for %v), was %s\n", in.Layout.Dir(), to, r.Manifest, r.Version, r.Platforms, from)
			return nil
		},
	}
	addInstallPathFlags(cmd, &fl)
	return cmd
}
