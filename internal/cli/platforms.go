package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// platformView is a platform as `berth platforms -o json|yaml` prints it:
// the dimensions plus what they imply for Kata.
type platformView struct {
	Platform         platform.Platform     `json:"platform"`
	Name             string                `json:"name"`
	Distribution     platform.Distribution `json:"distribution"`
	Runtime          platform.Runtime      `json:"runtime"`
	Hypervisor       platform.Hypervisor   `json:"hypervisor"`
	KataRuntime      platform.KataRuntime  `json:"kataRuntime"`
	TEE              platform.TEE          `json:"tee"`
	ProductLine      platform.ProductLine  `json:"productLine,omitempty"`
	Snapshotter      platform.Snapshotter  `json:"snapshotter"`
	GPU              bool                  `json:"gpu"`
	NvidiaCPU        bool                  `json:"nvidiaCpu"`
	Debug            bool                  `json:"debug"`
	Shim             string                `json:"shim,omitempty"`
	Handler          string                `json:"handler"`
	KataRuntimeClass string                `json:"kataRuntimeClass"`
	KataConfigFile   string                `json:"kataConfigFile"`
	PodOverhead      platform.Overhead     `json:"podOverhead"`
	DefaultMemoryMiB int                   `json:"defaultMemoryMiB"`
	SharedFS         string                `json:"sharedFS"`
	GuestPull        bool                  `json:"guestPull"`
}

func viewOf(p platform.Platform) platformView {
	return platformView{
		Platform: p, Name: p.Name(), Distribution: p.Distribution(), Runtime: p.Distribution().Runtime(),
		Hypervisor: p.Hypervisor(), KataRuntime: p.KataRuntime(), TEE: p.TEE(), ProductLine: p.ProductLine(), Snapshotter: p.Snapshotter(),
		GPU: p.GPU(), NvidiaCPU: p.NvidiaCPU(), Debug: p.Debug(), Shim: p.Shim(), Handler: p.Handler(),
		KataRuntimeClass: p.KataRuntimeClass(), KataConfigFile: p.KataConfigFile(),
		PodOverhead: p.PodOverhead(), DefaultMemoryMiB: p.DefaultMemoryMiB(), SharedFS: p.SharedFS(), GuestPull: p.GuestPull(),
	}
}

// explainView adds the layout and the rules to a platformView.
type explainView struct {
	platformView
	Input              string           `json:"input"`
	DefaultSnapshotter string           `json:"defaultSnapshotter"`
	Layout             *platform.Layout `json:"layout,omitempty"`
	Rules              []platform.Rule  `json:"rules"`
}

func newPlatformsCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "platforms",
		Short: "List the valid platforms (distribution x hypervisor x Kata runtime x TEE x snapshotter x image variant)",
		Long: `List every valid platform with its kata-deploy shim. The table shows
each platform once; every one also exists as NAME+debug (debug guest images),
which -o json and -o yaml list too.

A platform is written
dist-hypervisor-tee[-productline][+gpu|+nvidia-cpu][+debug][+rust][+snapshotter]
(the runtime and snapshotter only when not the default), as key=value pairs
(distribution=k3s,hypervisor=qemu,tee=snp,runtime=rust), as a kata-deploy
RuntimeClass or handler (kata-qemu-snp, kata-qemu-snp-runtime-rs-debug), or as
a Contrast platform name or handler (Metal-QEMU-SNP,
contrast-cc-metal-qemu-snp-1a2b3c4d).`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := g.Format()
			if err != nil {
				return err
			}
			all := platform.All()
			views := make([]platformView, len(all))
			for i, p := range all {
				views[i] = viewOf(p)
			}
			return output.Render(g.stdout, f, views, func(w io.Writer) error { return platformsTable(w, all) })
		},
	}
	cmd.AddCommand(newPlatformsExplainCmd(g), newPlatformsRulesCmd(g))
	return cmd
}

func platformsTable(w io.Writer, all []platform.Platform) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// Two columns keep the widest row (45 + 30) inside 80 columns; the
	// snapshotter and the rest are in explain and in -o json.
	fmt.Fprintln(tw, "PLATFORM\tKATA-DEPLOY SHIM")
	shown := 0
	for _, p := range all {
		if p.Debug() {
			continue
		}
		shown++
		shim := p.Shim()
		if shim == "" {
			shim = "(AKS kata-cc)"
		}
		fmt.Fprintf(tw, "%s\t%s\n", p, shim)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d platforms, %d with +debug variants. RuntimeClass and handler: kata-<shim>\n"+
		"(kata-<shim>-debug with +debug). Details: berth platforms explain NAME\n", shown, len(all))
	return err
}

func newPlatformsExplainCmd(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "explain NAME",
		Short: "Explain a platform: its dimensions, the rules that apply, its Kata runtime class and config",
		Example: `  berth platforms explain k3s-qemu-snp-genoa+gpu
  berth platforms explain kata-qemu-tdx
  berth platforms explain Metal-QEMU-SNP -o json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return UsageErr(fmt.Errorf("%s takes exactly one platform name, got %d arguments", cmd.CommandPath(), len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := g.Format()
			if err != nil {
				return err
			}
			p, err := platform.Parse(args[0])
			if err != nil {
				return UsageErr(err)
			}
			v := explainView{platformView: viewOf(p), Input: args[0],
				DefaultSnapshotter: p.DefaultSnapshotter().String(), Rules: platform.AppliesTo(p)}
			if v.Rules == nil {
				v.Rules = []platform.Rule{}
			}
			if l, ok := p.Distribution().Layout(); ok {
				v.Layout = &l
			}
			return output.Render(g.stdout, f, v, func(w io.Writer) error { return explainText(w, v) })
		},
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func explainText(w io.Writer, v explainView) error {
	p := v.Platform
	// Keys are at most 15 characters, so values start at column 17 and the
	// longest layout path still fits 80 columns.
	row := func(k, val string) { wrap(w, fmt.Sprintf("%-16s", k+":"), val, 80) }
	row("Platform", p.String())
	if !strings.EqualFold(strings.TrimSpace(v.Input), p.String()) {
		row("Given as", v.Input)
	}
	row("Label", v.Name)
	row("Distribution", fmt.Sprintf("%s - %s", v.Distribution, v.Distribution.Description()))
	row("Runtime", string(v.Runtime))
	if l := v.Layout; l != nil {
		row("  config", "/"+l.Config)
		if l.Template != "" {
			row("  template", "/"+l.Template)
		}
		if l.TemplateV3 != "" {
			row("  template v3", "/"+l.TemplateV3)
		}
		if l.DropInDir != "" {
			row("  drop-in dir", "/"+l.DropInDir)
		}
		row("  drop-in", string(l.DropIn))
		row("  socket", "/"+l.Socket)
		row("  units", strings.Join(l.Units, ", "))
	} else {
		row("  layout", "given where it is used (flags of berth config)")
	}
	row("Hypervisor", fmt.Sprintf("%s - %s", v.Hypervisor, v.Hypervisor.Description()))
	row("Kata runtime", fmt.Sprintf("%s - %s", v.KataRuntime, v.KataRuntime.Description()))
	row("TEE", fmt.Sprintf("%s - %s", v.TEE, v.TEE.Description()))
	if v.TEE.HasProductLines() {
		pl := v.ProductLine.String()
		if pl == "" {
			pl = "any"
		}
		row("Product line", fmt.Sprintf("%s - %s", pl, v.ProductLine.Description()))
	}
	snap := v.Snapshotter.String()
	if snap == v.DefaultSnapshotter {
		snap += " (default)"
	} else {
		snap += " (default: " + v.DefaultSnapshotter + ")"
	}
	row("Snapshotter", snap+" - "+v.Snapshotter.Description())
	row("GPU", yesNo(v.GPU))
	if v.NvidiaCPU {
		row("NVIDIA CPU", "yes (NVIDIA's guest stack without a GPU)")
	}
	row("Debug", yesNo(v.Debug))
	if v.Shim != "" {
		row("Shim", v.Shim+" (kata-deploy)")
	}
	row("Kata class", v.KataRuntimeClass)
	row("Handler", v.Handler)
	row("Kata config", v.KataConfigFile)
	row("Pod overhead", fmt.Sprintf("memory %dMi, cpu %dm", v.PodOverhead.MemoryMiB, v.PodOverhead.MilliCPU))
	row("Guest memory", fmt.Sprintf("%d MiB (default_memory)", v.DefaultMemoryMiB))
	row("Shared fs", v.SharedFS)
	pull := yesNo(v.GuestPull)
	if v.GuestPull && !v.Snapshotter.PullsInGuest() {
		pull += " (experimental_force_guest_pull)"
	}
	row("Guest pull", pull)
	if len(v.Rules) == 0 {
		_, err := fmt.Fprintln(w, "\nRules: none constrain this platform.")
		return err
	}
	fmt.Fprintln(w, "\nRules that apply:")
	for _, r := range v.Rules {
		fmt.Fprintf(w, "  %s\n", r.ID)
		wrap(w, "    ", r.Summary, 80)
		wrap(w, "    source: ", r.Source, 80)
	}
	return nil
}

// wrap writes text after prefix, folded at width; continuation lines are
// indented to the prefix.
func wrap(w io.Writer, prefix, text string, width int) {
	indent := strings.Repeat(" ", len(prefix))
	line := prefix
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}

func newPlatformsRulesCmd(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rules",
		Short: "List the rules that decide which platforms are valid (ID, summary, source)",
		Args:  NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := g.Format()
			if err != nil {
				return err
			}
			rules := platform.Rules()
			return output.Render(g.stdout, f, rules, func(w io.Writer) error {
				for i, r := range rules {
					if i > 0 {
						fmt.Fprintln(w)
					}
					fmt.Fprintln(w, r.ID)
					wrap(w, "  ", r.Summary, 80)
					wrap(w, "  source: ", r.Source, 80)
				}
				return nil
			})
		},
	}
}
