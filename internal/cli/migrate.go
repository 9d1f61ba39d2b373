package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/cluster/migrate"
	"berth.dev/berth/internal/host/errdefs"
)

// maxValuesFile bounds a kata-deploy values file berth reads: the chart's
// own is 26 KiB.
const maxValuesFile = 4 << 20

func newMigrateCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Carry another installer's configuration over to berth's chart values",
		Args:  NoArgs,
	}
	cmd.AddCommand(newMigrateKataDeployCmd(g))
	return cmd
}

func newMigrateKataDeployCmd(g *Globals) *cobra.Command {
	var allow bool
	cmd := &cobra.Command{
		Use:   "kata-deploy VALUES.yaml...",
		Short: "Turn kata-deploy 4.1 Helm values files into berth chart values",
		Long: `Read kata-deploy 4.1 Helm values files (the chart's own values.yaml, the
try-kata-*.values.yaml examples, your overrides), merge them in order over
kata-deploy 4.1.0's defaults as helm -f does (later files win, mappings
merge, lists replace), and print berth chart values to stdout: the
platforms of the enabled shims (kata-deploy's shim names, handlers and
RuntimeClasses, on the distribution k8sDistribution names, with the
snapshotter each shim uses and +debug twins under debug: true) and the
knobs berth has. stderr lists every knob the files set as mapped (to what),
not needed (berth does it by itself, and why) or not supported (and why).

Exit status: 0; 1 when a knob the files set is not supported (the values
are printed all the same), unless --allow-unsupported; 2 when a file is
malformed (the message names the file and line, never its text).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files := make([]migrate.Input, 0, len(args))
			for _, name := range args {
				b, err := readLimited(name, maxValuesFile)
				if err != nil {
					return UsageErr(err)
				}
				files = append(files, migrate.Input{Name: name, Data: b})
			}
			res, err := migrate.KataDeploy(files)
			if err != nil {
				return err
			}
			out, err := yaml.Marshal(res.Values)
			if err != nil {
				return fmt.Errorf("encoding the values: %w", err)
			}
			if _, err := fmt.Fprintf(g.Stdout(), "# berth chart values migrated from kata-deploy 4.1 values (berth migrate kata-deploy)\n%s", out); err != nil {
				return errdefs.Failed(fmt.Errorf("writing the values: %w", err))
			}
			writeMigrateReport(g.Stderr(), res)
			if n := len(res.Unsupported()); n > 0 && !allow {
				return errdefs.Refused(fmt.Errorf("%d knob(s) the files set are not supported by berth (listed above); --allow-unsupported accepts the values without them", n))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&allow, "allow-unsupported", false, "exit 0 even when a knob the files set is not supported")
	return cmd
}

// writeMigrateReport lists the knobs, one a line, and the notes. Values are
// not shown: a proxy URL may carry a password.
func writeMigrateReport(w io.Writer, res migrate.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KNOB\tOUTCOME\tTO / WHY\tSET AT")
	defaults := 0
	for _, k := range res.Knobs {
		if k.Outcome == migrate.Default {
			defaults++
			continue
		}
		detail := k.To
		if detail == "" {
			detail = k.Why
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s:%d\n", k.Path, k.Outcome, detail, k.File, k.Line)
	}
	_ = tw.Flush()
	if defaults > 0 {
		fmt.Fprintf(w, "%d further knob(s) are set to kata-deploy's default: nothing to carry over.\n", defaults)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}
