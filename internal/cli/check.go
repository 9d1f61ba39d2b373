package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/evaluate/preflight"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/internal/present/report"
	"berth.dev/berth/platform"
)

// nfdFormat is the extra -o value of berth check.
const nfdFormat output.Format = "nfd"

// checkFlags are the flags of berth check.
type checkFlags struct {
	platforms   []string
	all         bool
	ignore      []string
	strict      bool
	probe       bool
	noProbe     bool
	qemuPath    string
	custom      CustomFlags
	execPlugins bool
	nfdExpiry   time.Duration
	// network enables the live reachability probes of registries and
	// an attestation service.
	network        bool
	registries     []string
	attestation    []string
	networkTimeout time.Duration
}

func newCheckCmd(g *Globals) *cobra.Command {
	var fl checkFlags
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Tell which platforms this host can run, and why not",
		Long: `check discovers the host and evaluates it against the platforms.

Without --platform it prints a matrix of the platforms that make sense for
this host (those of the detected distribution, one per kata-deploy shim;
--all for every platform):
ready, ready with warnings, or not ready with the first blocking check and
its remedy, then the checks that failed or warned.

With --network it also checks that the container registry (--registry,
default registry.k8s.io) and the attestation service (--attestation-url)
answer; only on the live host, never for --root or a snapshot.

With --platform P (repeatable) it prints every check for P as a tree:
a failed check skips the checks that depend on it.

Exit status: 0 every requested platform is ready (without --platform: at
least one platform shown is ready), 1 otherwise, 2 usage or internal error.`,
		Example: `  berth check
  berth check --platform kubeadm-qemu-snp-genoa
  berth check --platform kata-qemu-tdx --ignore tdx.sgx -o json
  berth check -o nfd > /etc/kubernetes/node-feature-discovery/features.d/berth
  berth check --network --attestation-url https://kbs.example:8080
  berth check explain kvm.device.usable`,
		Args:        NoArgs,
		Annotations: map[string]string{AnnotationEarlyStart: "true"},
		RunE:        func(cmd *cobra.Command, _ []string) error { return runCheck(cmd, g, fl) },
	}
	f := cmd.Flags()
	f.StringArrayVarP(&fl.platforms, "platform", "p", nil, "platform to check in detail (canonical name, Kata runtime class or Contrast name); repeatable")
	f.BoolVar(&fl.all, "all", false, "show every valid platform in the matrix, not only those of the detected distribution")
	f.StringSliceVar(&fl.ignore, "ignore", nil, "check IDs whose failures become warnings (comma-separated, case-insensitive; \"all\" only alone)")
	f.BoolVar(&fl.strict, "strict", false, "treat warnings and unknown results as failures")
	f.BoolVar(&fl.probe, "probe", true, "run live probes that start processes or map device memory (the QEMU probe, the NVIDIA GPUs' CC-mode registers)")
	fl.custom.Add(cmd)
	f.StringVar(&fl.qemuPath, "hypervisor-path", "", "probe this QEMU (e.g. a distribution's) instead of the one berth install or kata-deploy puts under /opt/berth or /opt/kata, which is what the platform's configuration runs")
	f.BoolVar(&fl.noProbe, "no-probe", false, "do not run live probes that start processes")
	f.BoolVar(&fl.execPlugins, "exec-plugins", false, "run the executable host checks in /etc/berth/checks.d (as root)")
	f.DurationVar(&fl.nfdExpiry, "nfd-expiry", 0, "with -o nfd: add an expiry-time directive this far after the facts were collected (e.g. 24h)")
	f.BoolVar(&fl.network, "network", false, "probe the container registry and the attestation service over the network (live / root only)")
	f.StringArrayVar(&fl.registries, "registry", []string{defaultRegistry}, "with --network: registry host or URL whose /v2/ endpoint must answer; repeatable")
	f.StringArrayVar(&fl.attestation, "attestation-url", nil, "with --network: URL of the attestation service (Trustee KBS, Contrast coordinator) confidential guests must reach; repeatable")
	f.DurationVar(&fl.networkTimeout, "network-timeout", defaultNetworkTimeout, "with --network: how long to wait for each service")
	NonNegative(cmd, "nfd-expiry")
	cmd.AddCommand(newCheckExplainCmd(g))
	return cmd
}

// checkClock is the clock of berth check: SOURCE_DATE_EPOCH (seconds) when
// set, for reproducible output, else the real time.
func checkClock(getenv func(string) string) (func() time.Time, error) {
	s := getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, UsageErr(fmt.Errorf("SOURCE_DATE_EPOCH=%q: expected seconds since 1970", s))
	}
	t := time.Unix(n, 0).UTC()
	return func() time.Time { return t }, nil
}

func runCheck(cmd *cobra.Command, g *Globals, fl checkFlags) error {
	if fl.network && g.network == nil {
		// berth links no HTTP client: berth-cluster probes.
		if g.delegateTo == "" {
			return UsageErr(errors.New("this build of berth cannot probe the network"))
		}
		g.life.needSignals() // AnnotationEarlyStart: berth-cluster runs under them
		return g.runDelegate(cmd.Context(), g.delegateTo, "check", g.args)
	}
	format, err := g.Format(output.Table, output.JSON, output.YAML, nfdFormat)
	if err != nil {
		return err
	}
	now, err := checkClock(g.getenv)
	if err != nil {
		return err
	}
	var requested []platform.Platform
	for _, s := range fl.platforms {
		for _, one := range strings.Split(s, " ") {
			if one == "" {
				continue
			}
			p, err := platform.Parse(one)
			if err != nil {
				return UsageErr(fmt.Errorf("--platform: %w", err))
			}
			requested = append(requested, p)
		}
	}
	if fl.all && len(requested) > 0 {
		return UsageErr(errors.New("--all selects the matrix of every platform; it cannot be combined with --platform"))
	}
	// A custom distribution's runtime is read from the paths given.
	var custom *platform.Layout
	for _, p := range requested {
		l, err := fl.custom.Layout(p)
		if err != nil {
			return err
		}
		if l != nil {
			custom = l
		}
	}
	if custom == nil && (fl.custom != CustomFlags{}) {
		return UsageErr(errors.New("--containerd-config, --crio-config, --runtime-unit and --runtime-socket need a custom platform (--platform custom-...)"))
	}
	if fl.execPlugins {
		// Host plug-ins run in sessions of their own: berth stops them
		// when it is stopped (AnnotationEarlyStart).
		g.life.needSignals()
	}
	static := catalog.All()
	ig, err := check.ParseIgnore(fl.ignore, func(id string) bool {
		if strings.HasPrefix(id, "plugin.") {
			return true
		}
		for _, c := range static {
			if c.ID == id {
				return true
			}
		}
		return false
	})
	if err != nil {
		return UsageErr(err)
	}

	root, cleanup, err := g.OpenRoot()
	defer cleanup()
	if err != nil {
		return err
	}
	netOpt, err := networkProbe(cmd, g, fl)
	if err != nil {
		return err
	}
	probe := fl.probe && !fl.noProbe
	opt := g.DiscoverOptions(probe)
	opt.Now = now
	opt.ExecPlugins = fl.execPlugins
	opt.QEMUPath = fl.qemuPath
	opt.Layout = custom
	opt.Network = netOpt
	res, err := preflight.Run(cmd.Context(), root, preflight.Options{
		Discover: opt, Check: check.Options{Ignore: ig, Strict: fl.strict},
		Platforms: requested, All: fl.all, Digest: true, Catalogue: static,
	})
	if err != nil {
		return err
	}
	if err := interrupted(cmd.Context()); err != nil {
		return err
	}
	f, ps, vs, mode := res.Facts, res.Platforms, res.Verdicts, "detail"
	if res.Defaulted {
		mode = "matrix"
	}
	names := make([]string, len(requested))
	for i, p := range requested {
		names[i] = p.String()
	}
	rep := report.NewDigested(f, res.FactsDigest, mode, vs, report.Opts{Platforms: names, All: fl.all, Ignore: ig.String(), Strict: fl.strict, Probe: probe})
	style := report.Style{Color: g.color()}
	g.life.awaitSignals() // AnnotationEarlyStart
	switch format {
	case nfdFormat:
		var exp time.Time
		if fl.nfdExpiry > 0 {
			exp = f.CollectedAt.Add(fl.nfdExpiry)
		}
		err = report.WriteNFD(g.stdout, rep, f, exp)
	default:
		// The table escapes what the host provided; only its own
		// colours pass the output's escaping.
		render := output.Render
		if style.Color {
			render = output.RenderStyled
		}
		err = render(g.stdout, format, rep, func(w io.Writer) error {
			if mode == "matrix" {
				return report.WriteMatrix(w, rep, ps, style)
			}
			return report.WriteDetail(w, rep, style)
		})
	}
	if err != nil {
		return err
	}
	return checkExit(rep, mode)
}

// defaultRegistry is where every pod's sandbox (pause) image comes from
// unless the node is configured otherwise: registry.k8s.io/pause is the
// default sandbox image of containerd, CRI-O and the kubelet, and
// confidential guests pull it themselves on guest-pull platforms. A site
// with a mirror passes its own --registry.
const defaultRegistry = "registry.k8s.io"

// defaultNetworkTimeout is --network-timeout's default, netprobe's
// DefaultTimeout (a test holds the two equal; berth does not link netprobe).
const defaultNetworkTimeout = 5 * time.Second

// networkProbe turns the --network flags into discovery's probe, nil
// without --network; the target flags alone are a usage error, so that
// nobody believes a service was checked when it was not.
func networkProbe(cmd *cobra.Command, g *Globals, fl checkFlags) (*discover.NetworkProbe, error) {
	if !fl.network {
		for _, name := range []string{"registry", "attestation-url", "network-timeout"} {
			if cmd.Flags().Changed(name) {
				return nil, UsageErr(fmt.Errorf("--%s needs --network", name))
			}
		}
		return nil, nil
	}
	if fl.networkTimeout <= 0 {
		return nil, UsageErr(fmt.Errorf("--network-timeout %v: expected a positive duration", fl.networkTimeout))
	}
	np, err := g.network(fl.networkTimeout, fl.registries, fl.attestation)
	if err != nil {
		return nil, UsageErr(err)
	}
	return np, nil
}

// checkExit maps verdicts to the exit status: in detail mode every
// requested platform must be ready; in the matrix at least one platform
// must be.
func checkExit(rep *report.Report, mode string) error {
	if mode == "detail" && rep.AllReady() {
		return nil
	}
	if mode == "matrix" && rep.Summary.Ready+rep.Summary.ReadyWithWarnings > 0 {
		return nil
	}
	return errdefs.NotReady(errors.New(""))
}

func newCheckExplainCmd(g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:   "explain [ID]",
		Short: "Explain a check: what it checks, why, remedies and the platforms it applies to",
		Long:  "explain describes one check by ID; without an ID it lists every check by area.",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cat := catalog.All()
			if len(args) == 0 {
				return listChecks(g.stdout, cat)
			}
			id := strings.ToLower(args[0])
			for _, c := range cat {
				if c.ID == id {
					return explain(g.stdout, c)
				}
			}
			if strings.HasPrefix(id, "plugin.") {
				_, err := fmt.Fprintf(g.stdout, "%s\n  A finding reported by the host plug-in %q under /etc/berth (features.d or checks.d).\n  See that plug-in's documentation; berth check --exec-plugins runs executable checks.\n", id, strings.TrimPrefix(id, "plugin."))
				return err
			}
			var near []string
			for _, c := range cat {
				if strings.Contains(c.ID, id) || strings.HasPrefix(id, strings.SplitN(c.ID, ".", 2)[0]+".") {
					near = append(near, c.ID)
				}
			}
			msg := fmt.Sprintf("no check %q", args[0])
			if len(near) > 0 {
				msg += "; did you mean " + strings.Join(near, ", ") + "?"
			}
			return UsageErr(errors.New(msg + " (berth check explain lists every check)"))
		},
	}
}

func listChecks(w io.Writer, cat []check.Check) error {
	areas := map[string][]string{}
	var order []string
	for _, c := range cat {
		a := strings.SplitN(c.ID, ".", 2)[0]
		if _, ok := areas[a]; !ok {
			order = append(order, a)
		}
		areas[a] = append(areas[a], c.ID)
	}
	for _, a := range order {
		ids := areas[a]
		sort.Strings(ids)
		fmt.Fprintf(w, "%s\n", a)
		for _, id := range ids {
			for _, c := range cat {
				if c.ID == id {
					fmt.Fprintf(w, "  %-28s %s\n", id, "Checking "+c.Title)
				}
			}
		}
	}
	_, err := fmt.Fprintln(w, "plugin\n  plugin.<name>                findings and errors of host plug-ins")
	return err
}

func explain(w io.Writer, c check.Check) error {
	report.Wrap(w, c.ID+": ", "  ", "Checking "+c.Title)
	fmt.Fprintln(w)
	report.Wrap(w, "Why:        ", "            ", c.Why)
	report.Wrap(w, "Platforms:  ", "            ", c.Platforms)
	if c.Parent != "" {
		report.Wrap(w, "Depends on: ", "            ", c.Parent+" (skipped when it fails)")
	}
	if len(c.Reads) > 0 {
		report.Wrap(w, "Reads:      ", "            ", strings.Join(c.Reads, ", ")+" (the result is unknown when any of them is)")
	}
	fmt.Fprintln(w, "Remedies:")
	for _, r := range c.Remedies {
		report.Wrap(w, "  - ", "    ", r)
	}
	return nil
}
