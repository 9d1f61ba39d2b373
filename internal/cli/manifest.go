package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

func newManifestCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "manifest",
		Short: "Inspect component manifests: what a platform would install",
		Args:  NoArgs,
	}
	cmd.AddCommand(newManifestResolveCmd(g), newManifestSchemaCmd(g))
	return cmd
}

func newManifestResolveCmd(g *Globals) *cobra.Command {
	var plat, ref string
	cmd := &cobra.Command{
		Use:   "resolve --platform P --manifest M",
		Short: "List the components a platform needs from a manifest, with sizes and the measured boot",
		Long: `resolve selects the manifest's components whose serves dimensions all match
the platform and prints their names, versions, roles, download sizes, install
paths and sources, the total download against the whole manifest, and, for
confidential platforms, the measured boot (firmware, kernel, initrd, kernel
command line). Nothing is downloaded: this is what berth install will fetch.

The manifest is a PATH, PATH@sha256:<hex> or URL@sha256:<hex>.`,
		Example: `  berth manifest resolve --platform k3s-qemu-snp-genoa --manifest examples/manifest-kata.yaml
  berth manifest resolve --platform kata-clh --manifest kata.yaml@sha256:<hex> -o json`,
		Args: NoArgs,
		RunE: func(*cobra.Command, []string) error {
			format, err := g.Format()
			if err != nil {
				return err
			}
			if plat == "" || ref == "" {
				return UsageErr(fmt.Errorf("--platform and --manifest are required"))
			}
			p, err := platform.Parse(plat)
			if err != nil {
				return UsageErr(fmt.Errorf("--platform: %w", err))
			}
			r, err := manifest.ParseRef(ref)
			if err != nil {
				return UsageErr(fmt.Errorf("--manifest: %w", err))
			}
			m, err := manifest.LoadRef(r)
			if err != nil {
				return UsageErr(err)
			}
			plan, err := m.Plan(p)
			if err != nil {
				return UsageErr(err)
			}
			return output.Render(g.stdout, format, plan, func(w io.Writer) error { return writePlan(w, plan, len(m.Components)) })
		},
	}
	cmd.Flags().StringVar(&plat, "platform", "", "platform to resolve for (e.g. k3s-qemu-snp-genoa, kata-clh); required")
	cmd.Flags().StringVar(&ref, "manifest", "", "component manifest: PATH, PATH@sha256:<hex> or URL@sha256:<hex>; required")
	return cmd
}

func newManifestSchemaCmd(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the manifest format (" + manifest.APIVersion + ")",
		Args:  NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := io.WriteString(g.stdout, manifest.Schema())
			return err
		},
	}
}

// writePlan prints a plan for people: one row per component, the total, and
// the measured boot of a confidential platform.
func writePlan(w io.Writer, pl *manifest.Plan, all int) error {
	fmt.Fprintf(w, "Manifest:  %s %s (%s)\nPlatform:  %s\n\n", pl.Manifest, pl.Version, pl.Digest, pl.Platform)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVERSION\tROLE\tSIZE\tINSTALLS\tSOURCE")
	for _, c := range pl.Components {
		role := string(c.Role)
		if role == "" {
			role = "-"
		}
		paths := c.InstallPaths()
		installs := paths[0]
		if len(paths) > 1 {
			installs = fmt.Sprintf("%s (+%d more from %s)", paths[0], len(paths)-1, c.Archive.Type)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Name, c.Version, role, humanSize(c.Size), installs, c.Sources[0])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	pct := 0.0
	if pl.AllBytes > 0 {
		pct = 100 * float64(pl.Bytes) / float64(pl.AllBytes)
	}
	fmt.Fprintf(w, "\nTotal:     %d of %d components, %s of %s (%.1f%%)\n", len(pl.Components), all, humanSize(pl.Bytes), humanSize(pl.AllBytes), pct)
	if b := pl.Boot; b != nil {
		fmt.Fprintf(w, "\nMeasured boot:\n  firmware  %s (%s)\n  kernel    %s (%s)\n", b.Firmware.Name, b.Firmware.Path, b.Kernel.Name, b.Kernel.Path)
		if b.Initrd != nil {
			fmt.Fprintf(w, "  initrd    %s (%s)\n", b.Initrd.Name, b.Initrd.Path)
		}
		fmt.Fprintf(w, "  cmdline   %q\n", b.Cmdline)
	}
	return nil
}

// humanSize formats a byte count with one decimal in KiB, MiB or GiB.
func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
}
