package clustercmd

import (
	"berth.dev/berth/internal/cli"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/cluster/nodereport"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

func newRuntimeClassesCmd(g *cli.Globals) *cobra.Command {
	var platforms []string
	var suffix string
	var teeLabels, kataDeploy, nfd bool
	var tf tuningFlags
	cmd := &cobra.Command{
		Use:   "runtimeclasses",
		Short: "Print the RuntimeClasses of platforms, selecting the nodes the agent labelled ready",
		Long: `runtimeclasses prints one node.k8s.io/v1 RuntimeClass per --platform, named
as kata-deploy names it (kata-<shim>, kata-<shim>-debug): the handler berth
configures, kata-deploy's pod overhead for the shim, and a nodeSelector on
the label berth's agent publishes (berth.dev/platform.<name>: "true"), so
that pods only land on nodes that can run them. --kata-deploy and --nfd add
kata-deploy's own selectors and TEE key accounting; --overhead and
--node-selector tune one platform's class, and --default-class adds the
cluster's default class (kata) for one of them. YAML by default (apply
it with kubectl apply -f -), -o json for a v1 List.`,
		Example: `  berth runtimeclasses --platform k3s-qemu-snp-genoa | kubectl apply -f -
  berth runtimeclasses -p kata-qemu-tdx -p kata-qemu -o json`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := g.Format(output.YAML, output.JSON)
			if err != nil {
				if g.Output() == "table" { // the global default: YAML here
					format, err = output.YAML, nil
				} else {
					return err
				}
			}
			ps, err := platformList(platforms)
			if err != nil {
				return err
			}
			if len(ps) == 0 {
				return cli.UsageErr(errors.New("--platform is required (repeatable); berth platforms lists them"))
			}
			sfx, err := cli.ParseSuffixFlag(suffix, ps...)
			if err != nil {
				return err
			}
			tunings, defaultClass, err := tf.resolve(ps, sfx)
			if err != nil {
				return err
			}
			var items []json.RawMessage
			byClass := map[string]string{}
			for _, p := range ps {
				if other, dup := byClass[p.KataRuntimeClass()]; dup && other != p.String() {
					return cli.UsageErr(fmt.Errorf("platforms %s and %s are both RuntimeClass %s (kata-deploy's name of their shim): a cluster has one class of that name, so ask for one of them", other, p, p.KataRuntimeClass()))
				}
				byClass[p.KataRuntimeClass()] = p.String()
			}
			type class struct {
				p    platform.Platform
				name string
			}
			var classes []class
			for _, p := range ps {
				classes = append(classes, class{p: p})
				if defaultClass != nil && *defaultClass == p {
					// Beside its platform's class, as kata-deploy's chart
					// renders it.
					classes = append(classes, class{p: p, name: tf.defaultName})
				}
			}
			for i, c := range classes {
				p := c.p
				if !nodereport.LabelFits(p.Name()) {
					return cli.UsageErr(fmt.Errorf("platform %s: its label %s%s is longer than a label key may be, so the agent cannot publish it", p, nodereport.PlatformLabelPrefix, p.Name()))
				}
				doc := configure.RuntimeClass(p, configure.RuntimeClassOptions{TEELabels: teeLabels, KataDeploy: kataDeploy, NFD: nfd, Suffix: sfx, Tuning: tunings[p], Name: c.name})
				if format == output.YAML {
					if i > 0 {
						fmt.Fprintln(g.Stdout(), "---")
					}
					if _, err := g.Stdout().Write(doc); err != nil {
						return err
					}
					continue
				}
				j, err := yaml.YAMLToJSON(doc)
				if err != nil {
					return fmt.Errorf("RuntimeClass %s: %w", p.KataRuntimeClass(), err)
				}
				items = append(items, j)
			}
			if format == output.JSON {
				return output.Render(g.Stdout(), output.JSON, map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, nil)
			}
			return nil
		},
	}
	cli.AddSuffixFlag(cmd, &suffix)
	tf.add(cmd)
	cmd.Flags().StringArrayVarP(&platforms, "platform", "p", nil, "platform (canonical name, Kata runtime class or Contrast name); repeatable")
	cmd.Flags().BoolVar(&teeLabels, "tee-labels", false, "also require Node Feature Discovery's own TEE label (feature.node.kubernetes.io/cpu-security.*)")
	cmd.Flags().BoolVar(&kataDeploy, "kata-deploy", false, "also select nodes as kata-deploy's chart does (katacontainers.io/kata-runtime, the GPU operator's cc.ready.state)")
	cmd.Flags().BoolVar(&nfd, "nfd", false, "kata-deploy's NFD rules are active: select its TEE label and consume one TEE key (sev-snp.amd.com/esids, tdx.intel.com/keys) per sandbox")
	return cmd
}
