package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/cli/buildinfo"
	"berth.dev/berth/internal/host/snapshot"
)

func newSnapshotCmd(g *Globals) *cobra.Command {
	var probe bool
	cmd := &cobra.Command{
		Use:   "snapshot -o FILE.tar.gz",
		Short: "Capture what discovery reads on this host into an archive for offline analysis",
		Long: `snapshot runs discovery on the host root and writes exactly what it read —
file contents, directory listings, symlink targets, command outputs and
live-probe results — to a .tar.gz, with registry credentials and private
keys redacted. "berth facts --root FILE.tar.gz" on any machine reproduces
this host's facts; live probes come back marked "recorded".

For this command -o names the archive ("-" writes it to stdout).`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("output") || g.output == "" {
				return UsageErr(errNoSnapshotFile)
			}
			dest := g.output
			if dest != "-" && !strings.HasSuffix(dest, ".tar.gz") && !strings.HasSuffix(dest, ".tgz") {
				return UsageErr(fmt.Errorf("snapshot file %q: expected a name ending in .tar.gz", dest))
			}
			root, cleanup, err := g.OpenRoot()
			defer cleanup()
			if err != nil {
				return err
			}
			var w io.Writer = g.stdout
			var tmp *os.File
			if dest != "-" {
				// Write next to the destination and rename, so that an
				// interrupted run leaves no half archive under the name.
				tmp, err = os.CreateTemp(filepath.Dir(dest), ".berth-snapshot-*")
				if err != nil {
					return fmt.Errorf("creating snapshot %s: %w", dest, err)
				}
				name := tmp.Name()
				defer g.life.add(func() { _ = os.Remove(name) })()
				w = tmp
			}
			opt := snapshot.Options{BerthVersion: buildinfo.Get().Version, Discover: g.DiscoverOptions(probe)}
			_, m, err := snapshot.Take(cmd.Context(), root, w, opt)
			if err != nil {
				return err
			}
			if err := interrupted(cmd.Context()); err != nil {
				return err // no archive under the name: what was read may be partial
			}
			if tmp != nil {
				if err := tmp.Close(); err != nil {
					return fmt.Errorf("writing snapshot %s: %w", dest, err)
				}
				if err := os.Rename(tmp.Name(), dest); err != nil {
					return fmt.Errorf("writing snapshot %s: %w", dest, err)
				}
			}
			fmt.Fprintf(g.stderr, "wrote %s: %d files, %d placeholders, %d symlinks, %d listings, %d commands, %d probes, %d redacted files\n",
				dest, len(m.Files), len(m.Placeholders), len(m.Symlinks), len(m.Listings), len(m.Commands), len(m.Probes), len(m.Redactions))
			return nil
		},
	}
	cmd.Flags().BoolVar(&probe, "probe", false, "also run live probes that start processes or map device memory (the QEMU probe, the NVIDIA GPUs' CC-mode registers)")
	return cmd
}
