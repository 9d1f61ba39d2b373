package installcmd

import (
	"berth.dev/berth/internal/cli"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// installFlags are the flags of install, bundle, rollback and uninstall.
type installFlags struct {
	platforms     []string
	manifest      string
	prefix        string
	from          []string
	cache         string
	dryRun        bool
	force         bool
	parallel      int
	noConfig      bool
	restart       bool
	configVersion int
	out           string
	maxSize       string
	custom        cli.CustomFlags
	kataConfigDir string
	// suffix is --install-suffix as given.
	suffix string
	// kata is the operator's tuning of each platform's Kata configuration.
	kata cli.KataFlags
}

// target is the install the flags name (--install-suffix, --prefix,
// --kata-config-dir), defaulted and validated for plats: the one value
// every name of the install derives from (configure.NewInstall).
func (fl installFlags) target(plats ...platform.Platform) (configure.Install, error) {
	return configure.NewInstall(configure.InstallFlags{Suffix: fl.suffix, Prefix: fl.prefix, KataConfigDir: fl.kataConfigDir}, plats...)
}

func addInstallPathFlags(cmd *cobra.Command, fl *installFlags) {
	f := cmd.Flags()
	f.StringVar(&fl.prefix, "prefix", "", "installation prefix, an absolute path on the host named by --root (default "+configure.DefaultPrefix+", "+configure.DefaultPrefix+"-<suffix> with --install-suffix)")
	cli.AddSuffixFlag(cmd, &fl.suffix)
}

func addFetchFlags(cmd *cobra.Command, fl *installFlags) {
	f := cmd.Flags()
	f.StringVarP(&fl.manifest, "manifest", "m", "", "component manifest: PATH, PATH@sha256:<hex> or URL@sha256:<hex> (default: the one in a --from bundle)")
	f.StringArrayVar(&fl.from, "from", nil, "local directory (files named by sha256 or file name) or bundle .tar to take files from before the network; repeatable")
	f.IntVar(&fl.parallel, "parallel", 4, "downloads at once")
	f.StringVar(&fl.maxSize, "max-component-size", "8GiB", "refuse, before downloading anything, a manifest declaring a component larger than this (bytes, or with KiB, MiB, GiB, TiB)")
}

func newInstallCmd(g *cli.Globals) *cobra.Command {
	var fl installFlags
	cmd := &cobra.Command{
		Use:   "install --platform P --manifest M",
		Short: "Install what a platform needs from a component manifest, configure the runtime and verify it",
		Long: `install resolves the components the platform needs from the manifest,
runs the platform's checks on this node (refusing a failing platform unless
--force), fetches the components (from --from directories or bundles, the
cache, then the manifest's URLs), verifies every SHA-256, installs them into
<prefix>/versions/<id>/ and switches <prefix>/current to it atomically. Then
it applies each platform's runtime configuration (berth config apply) and,
on a live root, asks the running runtime whether each platform's handler is
live (berth verify), reporting every platform.

A re-run with nothing to do changes nothing and fetches nothing. The
installation it replaces stays, for berth rollback. Installing a second
platform keeps the first, and an upgrade (a new manifest) upgrades every
platform the prefix serves.

Exit status: 0 installed (and every handler live, when verified), 1 a
platform is not ready, the install failed, or the handler of any platform
is not live (or the runtime could not be asked), 2 usage error.`,
		Example: `  berth install --platform kubeadm-qemu-snp --manifest kata-3.24.yaml --dry-run
  sudo berth install -p kubeadm-qemu-snp -m kata-3.24.yaml --restart
  sudo berth install -p kubeadm-qemu-snp --from /media/usb/berth-bundle.tar`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runInstall(cmd.Context(), g, fl) },
	}
	addInstallPathFlags(cmd, &fl)
	addFetchFlags(cmd, &fl)
	f := cmd.Flags()
	f.StringVar(&fl.cache, "cache", "", "download cache, a directory on this machine (default "+manifest.DefaultCache+" inside --root)")
	f.StringArrayVarP(&fl.platforms, "platform", "p", nil, "platform to install (canonical name, Kata runtime class or Contrast name); repeatable")
	f.BoolVar(&fl.dryRun, "dry-run", false, "show the components, their sizes and sources, and change nothing")
	f.BoolVar(&fl.force, "force", false, "install even though the platform's checks fail on this node")
	f.BoolVar(&fl.noConfig, "no-config", false, "install the files only: no runtime configuration, no verify")
	f.BoolVar(&fl.restart, "restart", false, "restart the container runtime if its configuration changed (needed for verify to see the handler)")
	f.IntVar(&fl.configVersion, "containerd-config-version", 0, "containerd config version (2 or 3) when the node's containerd version is unknown")
	fl.custom.Add(cmd)
	f.StringVar(&fl.kataConfigDir, "kata-config-dir", "", "directory for the Kata configuration files (default <prefix>/etc/kata)")
	fl.kata.Add(cmd)
	cli.Positive(cmd, "parallel")
	return cmd
}

// layout is the installation prefix --prefix inside --root, opened for
// writing (a usage error when --root is not a directory).
func layout(g *cli.Globals, prefix string) (install.Layout, error) {
	w, err := g.Writable()
	if err != nil {
		return install.Layout{}, err
	}
	return install.Layout{Root: w, Prefix: prefix}, nil
}

// targetLayout is the install target of rollback and uninstall (no
// platform named) and its prefix opened for writing.
func (fl installFlags) targetLayout(g *cli.Globals) (configure.Install, install.Layout, error) {
	target, err := fl.target()
	if err != nil {
		return configure.Install{}, install.Layout{}, err
	}
	l, err := layout(g, target.Prefix)
	return target, l, err
}

// parseSize parses a byte count: a number, optionally followed by K, M, G
// or T (KiB, MiB, GiB, TiB: powers of 1024) and an optional B.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = strings.TrimSpace(t[:n-1])
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("%q: expected a size such as 8GiB, 512MiB or 1073741824", s)
	}
	return v * mult, nil
}

func parsePlatforms(ss []string) ([]platform.Platform, error) {
	var ps []platform.Platform
	for _, s := range ss {
		p, err := cli.ParsePlatformFlag(s)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	if len(ps) == 0 {
		return nil, cli.UsageErr(errors.New("--platform is required: berth never picks a platform for you (berth check lists those this node can run)"))
	}
	return ps, nil
}

// loadManifest loads --manifest, or the manifest of the only --from
// bundle, and returns it with its bytes.
func loadManifest(ctx context.Context, f *fetch.Fetcher, fl installFlags, bundles []*install.Bundle) (*manifest.Manifest, []byte, error) {
	if fl.manifest != "" {
		ref, err := manifest.ParseRef(fl.manifest)
		if err != nil {
			return nil, nil, cli.UsageErr(err)
		}
		if ref.Remote {
			// Pinned by ParseRef: the digest is checked before parsing.
			data, err := f.Bytes(ctx, ref.Location, manifest.MaxSize, ref.SHA256)
			if err != nil {
				return nil, nil, fmt.Errorf("manifest: %w", err)
			}
			// A manifest that does not parse is bad input (exit 2).
			m, err := manifest.Parse(data, ref.String())
			return m, data, cli.UsageErr(err)
		}
		m, err := manifest.LoadRef(ref)
		if err != nil {
			return nil, nil, cli.UsageErr(err)
		}
		data, err := os.ReadFile(ref.Location)
		return m, data, err
	}
	switch len(bundles) {
	case 0:
		return nil, nil, cli.UsageErr(errors.New("--manifest is required (or --from a bundle made by berth bundle)"))
	case 1:
	default:
		return nil, nil, cli.UsageErr(errors.New("several --from bundles: pass --manifest to say which release to install"))
	}
	data, err := bundles[0].Manifest()
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Parse(data, bundles[0].Path()+"!"+install.BundleManifest)
	return m, data, cli.UsageErr(err)
}

// newFetcher builds the fetcher of install and bundle, with the cache
// --cache names (a directory on this machine). Without --cache, with
// hostCache set (install), the cache is /var/cache/berth inside --root,
// resolved there as the host would (ResolveIn) and confined to it: a
// cache path leaving the root is refused (exit 1) before anything is
// changed. Without either (bundle) there is no cache. The returned close
// releases what it opened and is never nil.
func newFetcher(g *cli.Globals, fl installFlags, ls []fetch.Locator, hostCache bool) (*fetch.Fetcher, func(), error) {
	limit, err := parseSize(fl.maxSize)
	if err != nil {
		return nil, func() {}, cli.UsageErr(fmt.Errorf("--max-component-size %w", err))
	}
	f := fetch.New(ls, fl.cache)
	f.Log = g.Log()
	f.MaxItemSize = limit
	closeAll := func() { f.Close() }
	if fl.cache != "" || !hostCache {
		return f, closeAll, nil
	}
	host, err := g.Writable()
	if err != nil {
		// Not a directory (a snapshot): the dry run still works, and the
		// install itself is refused when it opens the prefix.
		return f, closeAll, nil
	}
	rel, _, err := install.ResolveIn(host, manifest.DefaultCache)
	if err != nil {
		if re := (*install.RefusedError)(nil); errors.As(err, &re) {
			re.Path = "cache " + re.Path
		}
		return nil, closeAll, err
	}
	f.Cache, f.CacheIn, f.CacheRel = host.Path(rel), host, rel
	return f, closeAll, nil
}

// progress reports fetch events: JSON lines on stdout with -o json, else
// one line per component start, retry, fallback and finish (and every 10%
// of a download) on stderr.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	json  bool
	start time.Time
	last  map[string]int64
}

func newProgress(g *cli.Globals, format output.Format) *progress {
	p := &progress{w: g.Stderr(), start: time.Now(), last: map[string]int64{}}
	if format == output.JSON {
		p.w, p.json = g.Stdout(), true
	}
	return p
}

func (p *progress) event(e fetch.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.Phase == fetch.PhaseProgress {
		step := max(e.Total/10, 1)
		if e.Bytes/step == p.last[e.Component]/step {
			return
		}
		p.last[e.Component] = e.Bytes
	}
	if p.json {
		b, _ := json.Marshal(struct {
			Time string `json:"time"`
			fetch.Event
		}{time.Now().UTC().Format(time.RFC3339Nano), e})
		fmt.Fprintf(p.w, "%s\n", b)
		return
	}
	switch e.Phase {
	case fetch.PhaseStart:
		fmt.Fprintf(p.w, "fetch %s (%s)\n", e.Component, human(e.Total))
	case fetch.PhaseProgress:
		fmt.Fprintf(p.w, "  %s %3d%% %s/%s\n", e.Component, e.Bytes*100/max(e.Total, 1), human(e.Bytes), human(e.Total))
	case fetch.PhaseRetry:
		fmt.Fprintf(p.w, "  %s: retrying %s at %s: %s\n", e.Component, e.Source, human(e.Bytes), e.Error)
	case fetch.PhaseFallback:
		fmt.Fprintf(p.w, "  %s: %s unusable, trying the next source: %s\n", e.Component, e.Source, e.Error)
	case fetch.PhaseDone:
		fmt.Fprintf(p.w, "  %s verified (from %s)\n", e.Component, e.Source)
	}
}

func human(n int64) string { return fetch.Human(n) }

// dryRunComponent is one line of install --dry-run.
type dryRunComponent struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Size    int64  `json:"size"`
	SHA256  string `json:"sha256"`
	Source  string `json:"source"`
}

// dryRun is what install --dry-run prints.
type dryRun struct {
	Prefix     string            `json:"prefix"`
	Plan       *install.Plan     `json:"plan"`
	Components []dryRunComponent `json:"components"`
	// ToFetch is the size of the components that no local source or the
	// cache has.
	ToFetch int64 `json:"toFetch"`
}

func planSources(f *fetch.Fetcher, pl *install.Plan) ([]dryRunComponent, int64) {
	var out []dryRunComponent
	var toFetch int64
	for _, c := range pl.Components {
		it := install.Item(c)
		d := dryRunComponent{Name: c.Name, Version: c.Version, Size: c.Size, SHA256: c.SHA256}
		if src, ok := f.Local(it); ok {
			d.Source = src
		}
		if d.Source == "" && len(c.Sources) > 0 {
			d.Source = c.Sources[0]
			toFetch += c.Size
		}
		out = append(out, d)
	}
	return out, toFetch
}

func writeDryRun(w io.Writer, d dryRun) error {
	pl := d.Plan
	fmt.Fprintf(w, "%s %s (%s) for %s into %s/versions/%s\n", pl.Manifest, pl.Version, pl.Digest, strings.Join(pl.Platforms, ", "), d.Prefix, pl.ID)
	if len(pl.Kept) > 0 {
		fmt.Fprintf(w, "keeping the installed platforms %s (berth uninstall removes all)\n", strings.Join(pl.Kept, ", "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tVERSION\tSIZE\tSOURCE")
	for _, c := range d.Components {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Version, human(c.Size), c.Source)
	}
	tw.Flush()
	pct := 0.0
	if pl.AllBytes > 0 {
		pct = float64(pl.Bytes) * 100 / float64(pl.AllBytes)
	}
	_, err := fmt.Fprintf(w, "total %s in %d components (%.0f%% of the manifest's %s); to download %s\n",
		human(pl.Bytes), len(pl.Components), pct, human(pl.AllBytes), human(d.ToFetch))
	return err
}

func runInstall(ctx context.Context, g *cli.Globals, fl installFlags) error {
	format, err := g.Format(output.Table, output.JSON, output.YAML)
	if err != nil {
		return err
	}
	ps, err := parsePlatforms(fl.platforms)
	if err != nil {
		return err
	}
	target, err := fl.target(ps...)
	if err != nil {
		return err
	}
	if err := (configure.Paths{Prefix: fl.prefix, KataConfigDir: fl.kataConfigDir}).Check(); err != nil {
		return cli.UsageErr(err)
	}
	kata, err := fl.kata.PerPlatform(ps, nil)
	if err != nil {
		return err
	}
	ls, bundles, err := install.Locators(fl.from)
	if err != nil {
		return cli.UsageErr(err)
	}
	fetcher, closeFetcher, err := newFetcher(g, fl, ls, true)
	defer closeFetcher()
	if err != nil {
		return err
	}
	m, _, err := loadManifest(ctx, fetcher, fl, bundles)
	if err != nil {
		return err
	}
	root, cleanup, err := g.OpenRoot()
	defer cleanup()
	if err != nil {
		return err
	}
	// One custom layout for the custom platforms among ps (a node runs one
	// container runtime).
	var custom *platform.Layout
	for _, p := range ps {
		l, err := fl.custom.Layout(p)
		if err != nil {
			return err
		}
		if l != nil {
			custom = l
		}
	}
	layoutOf := func(p platform.Platform) *platform.Layout {
		if p.Distribution().UserLayout() {
			return custom
		}
		return nil
	}
	dopt := g.DiscoverOptions(false)
	dopt.Layout = custom
	node := discover.Run(ctx, root, dopt)
	l, err := layout(g, target.Prefix)
	if err != nil && !fl.dryRun {
		return err
	}
	if err != nil {
		// A dry run on a snapshot: what would be installed, and a warning
		// that the install itself would be refused.
		l = install.Layout{Prefix: target.Prefix}
	}
	wf := &install.Workflow{
		Installer: &install.Installer{
			Layout:   l,
			Fetcher:  fetcher,
			Parallel: fl.parallel,
			Log:      g.Log(),
		},
		// The platforms' checks, as berth check runs them.
		Checker: installChecker{facts: node, force: fl.force},
	}
	if fl.dryRun {
		pl, refusals, err := wf.DryRun(m, ps)
		for _, r := range refusals {
			// A dry run changes nothing: say what the real run would refuse.
			fmt.Fprintf(g.Stderr(), "warning: %v\n", r)
		}
		if err != nil {
			return err
		}
		if err := wf.Installer.Preflight(ctx, pl); err != nil {
			fmt.Fprintf(g.Stderr(), "warning: the install would be refused: %v\n", err)
		}
		comps, toFetch := planSources(fetcher, pl)
		d := dryRun{Prefix: wf.Installer.Layout.Dir(), Plan: pl, Components: comps, ToFetch: toFetch}
		return output.Render(g.Stdout(), format, d, func(w io.Writer) error { return writeDryRun(w, d) })
	}
	pl, err := wf.Plan(m, ps)
	if err != nil {
		return err
	}
	rep := &installReporter{g: g, format: format, prefix: wf.Installer.Layout.Dir(), plan: pl}
	switch {
	case format == output.Table && isTerminal(g.Stderr()):
		rep.bars = newBarProgress(g.Stderr(), pl.Bytes)
		fetcher.Progress = rep.bars.event
	case format != output.YAML:
		fetcher.Progress = newProgress(g, format).event
	}
	wf.Reporter = rep
	if !fl.noConfig {
		w, err := g.Writable()
		if err != nil {
			return err
		}
		// The configuration names paths under the prefix as the host sees
		// it, which the stable links resolve to the current installation.
		wf.Applier = install.RuntimeConfig{FS: w, Change: g.ChangeOptions(), Options: configure.Options{Paths: target.Paths("")}, Kata: kata,
			Target: func(p platform.Platform) (configure.Target, error) {
				return cli.TargetForLayout(node, p, layoutOf(p), fl.configVersion)
			}}
		if fl.restart {
			ra := wf.Applier.(install.RuntimeConfig)
			ra.Runtime = func(ctx context.Context, p platform.Platform) (configure.Runtime, bool) {
				l, _ := p.Distribution().Layout()
				if c := layoutOf(p); c != nil {
					l = *c
				}
				return g.RuntimeChange(root, w, true, target.Suffix).Live(ctx, l, p)
			}
			wf.Applier = ra
		}
		wf.Restarter = restarter{change: rep.prose().RuntimeChange(root, w, fl.restart, target.Suffix), custom: custom}
		if root.Live() {
			wf.Verifier = verifier{g: g, suffix: target.Suffix}
		} else {
			wf.NoVerify = fmt.Sprintf("--root %s is not a running system (berth verify asks the live runtime)", root.Path())
		}
	}
	_, err = wf.Run(ctx, pl)
	return err
}

// installChecker is install's install.Checker: the platform's checks on
// the node, as berth check runs them; --force lets a failing platform
// through.
type installChecker struct {
	facts *facts.Facts
	force bool
}

func (c installChecker) Check(p platform.Platform) error {
	return cli.RefuseNotReady(c.facts, p, c.force)
}

// restarter is install's install.Restarter: it says what apply changed.
// With --restart the applier has restarted the runtime already, verified
// it and rolled back what broke it (configure.ApplyLive); without, it
// prints the commands that load and verify the change.
type restarter struct {
	// change says what changed, and whether it restarts.
	change runtimectl.Change
	// custom is the custom distribution's layout, if any.
	custom *platform.Layout
}

func (r restarter) Restart(_ context.Context, p platform.Platform, res *configure.Result) error {
	if !r.change.Restart {
		l, _ := p.Distribution().Layout()
		if p.Distribution().UserLayout() && r.custom != nil {
			l = *r.custom
		}
		r.change.ReportNoRestart(res, l, p, "applied")
		return nil
	}
	r.change.SayChanged(res, "applied")
	return nil
}

// verifier is install's install.Verifier: berth verify through the
// binary's wiring (Globals.VerifyPlatform).
type verifier struct {
	g *cli.Globals
	// suffix is the side-by-side install whose handler verify looks for.
	suffix configure.Suffix
}

func (v verifier) Verify(ctx context.Context, p platform.Platform) (configure.Verification, error) {
	return v.g.VerifyPlatform(ctx, p, v.suffix)
}

// installReporter is install's install.Reporter: the summary and each
// verification, as a table, JSON lines or YAML documents.
type installReporter struct {
	g      *cli.Globals
	format output.Format
	prefix string
	plan   *install.Plan
	bars   *barProgress
}

// prose is where apply's prose goes: stdout for a table, else stderr, to
// keep stdout machine-readable.
func (r *installReporter) prose() *cli.Globals {
	if r.format == output.Table {
		return r.g
	}
	return r.g.WithStdout(r.g.Stderr())
}

func (r *installReporter) Installed(res *install.Result, took time.Duration, err error) {
	if r.bars != nil {
		r.bars.finish()
	}
	if err != nil {
		return
	}
	pl := r.plan
	s := installSummary{Prefix: r.prefix, ID: pl.ID, Platforms: pl.Platforms, Changed: res.Changed,
		Previous: res.Previous, Bytes: pl.Bytes, Fetched: res.Fetched, Seconds: took.Seconds()}
	r.emit(s, func(w io.Writer) error { return writeInstallSummary(w, s) })
}

func (r *installReporter) Verified(v configure.Verification) {
	r.emit(struct {
		Verify configure.Verification `json:"verify"`
	}{v}, func(w io.Writer) error { return writeVerification(w, v) })
}

func (r *installReporter) NotVerified(reason string) {
	fmt.Fprintf(r.g.Stderr(), "not verifying: %s\n", reason)
}

// emit writes one report: a table, one JSON line (after the progress
// lines, all JSON lines), or one YAML document.
func (r *installReporter) emit(v any, table func(io.Writer) error) {
	switch r.format {
	case output.JSON:
		b, _ := json.Marshal(v)
		fmt.Fprintf(r.g.Stdout(), "%s\n", b)
	case output.YAML:
		fmt.Fprintln(r.g.Stdout(), "---")
		output.Render(r.g.Stdout(), r.format, v, nil)
	default:
		table(r.g.Stdout())
	}
}

// writeVerification is one platform's line, as berth verify says it.
func writeVerification(w io.Writer, v configure.Verification) error {
	var err error
	switch {
	case v.Live:
		_, err = fmt.Fprintf(w, "handler %s: live in %s (%s)\n", v.Handler, v.Runtime, v.Socket)
	case v.Runtime == "":
		_, err = fmt.Fprintf(w, "handler %s: unknown: the runtime at %s could not be asked: %s\n", v.Handler, v.Socket, orDefault(v.Error, "no answer"))
	case v.SnapshotterError != "":
		// The handler is loaded, but no image can be pulled through it.
		_, err = fmt.Fprintf(w, "handler %s: NOT live in %s (%s): its snapshotter %s is not: %s\n", v.Handler, v.Runtime, v.Socket, v.Snapshotter, v.SnapshotterError)
	default:
		_, err = fmt.Fprintf(w, "handler %s: NOT live in %s (%s); the runtime has: %s\n", v.Handler, v.Runtime, v.Socket, strings.Join(v.Handlers, ", "))
	}
	return err
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// installSummary is what install prints when done.
type installSummary struct {
	Prefix    string   `json:"prefix"`
	ID        string   `json:"id"`
	Platforms []string `json:"platforms"`
	Changed   bool     `json:"changed"`
	Previous  string   `json:"previous,omitempty"`
	Bytes     int64    `json:"bytes"`
	Fetched   int64    `json:"fetched"`
	Seconds   float64  `json:"seconds"`
}

func writeInstallSummary(w io.Writer, s installSummary) error {
	if !s.Changed {
		_, err := fmt.Fprintf(w, "%s: already installed (%s), nothing fetched\n", s.Prefix, s.ID)
		return err
	}
	_, err := fmt.Fprintf(w, "installed %s into %s/versions/%s (%s, %s downloaded, %.1fs); current -> versions/%s\n",
		strings.Join(s.Platforms, ", "), s.Prefix, s.ID, human(s.Bytes), human(s.Fetched), s.Seconds, s.ID)
	if err == nil && s.Previous != "" && s.Previous != s.ID {
		_, err = fmt.Fprintf(w, "previous installation %s kept for berth rollback\n", s.Previous)
	}
	return err
}

// isTerminal reports whether w is a terminal (progress bars) rather than a
// pipe or file (progress lines).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
