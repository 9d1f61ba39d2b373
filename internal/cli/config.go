package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/check"
	"berth.dev/berth/internal/checks"
	"berth.dev/berth/internal/configure"
	"berth.dev/berth/internal/discover"
	"berth.dev/berth/internal/facts"
	"berth.dev/berth/internal/hostfs"
	"berth.dev/berth/platform"
)

// configFlags are the flags shared by config render, apply and remove.
type configFlags struct {
	platform      string
	prefix        string
	out           string
	force         bool
	restart       bool
	all           bool
	teeLabels     bool
	configVersion int
}

func newConfigCmd(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Render, apply or remove the runtime configuration of a platform",
		Long: `config writes what a platform needs in the node's container runtime: the
Kata configuration, the containerd handler (or CRI-O drop-in) hooked in the
way the node's distribution supports, and the RuntimeClass.

The platform is always your choice (--platform); the node's facts only fill
in paths and versions. A platform whose checks fail on this node is refused
unless --force.`,
		Args: NoArgs,
	}
	cmd.AddCommand(newConfigRenderCmd(g), newConfigApplyCmd(g), newConfigRemoveCmd(g))
	return cmd
}

func addPlatformFlags(cmd *cobra.Command, fl *configFlags) {
	f := cmd.Flags()
	f.StringVarP(&fl.platform, "platform", "p", "", "platform to configure (canonical name, Kata runtime class or Contrast name)")
	f.StringVar(&fl.prefix, "prefix", configure.DefaultPrefix, "where Kata's binaries and guest images are installed")
	f.BoolVar(&fl.force, "force", false, "configure the platform even though its checks fail on this node")
	f.IntVar(&fl.configVersion, "containerd-config-version", 0, "containerd config version to write (2 for containerd 1.x, 3 for 2.x) when the node's containerd version is unknown")
}

func newConfigRenderCmd(g *Globals) *cobra.Command {
	var fl configFlags
	cmd := &cobra.Command{
		Use:   "render --platform P",
		Short: "Print (or write under --out) every file the platform needs on this node",
		Long: `render prints the Kata configuration, the runtime configuration as apply
would leave it, and the RuntimeClass manifest; with --out DIR it writes them
under DIR (host files at their path below DIR, the RuntimeClass as
runtimeclass-<name>.yaml). It changes nothing on the node.`,
		Example: `  berth config render --platform kubeadm-qemu-snp
  berth --root /host --live config render -p k3s-qemu-tdx --out /tmp/berth`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runConfigRender(cmd.Context(), g, fl) },
	}
	addPlatformFlags(cmd, &fl)
	cmd.Flags().StringVar(&fl.out, "out", "", "write the files under this directory instead of printing them")
	cmd.Flags().BoolVar(&fl.teeLabels, "tee-labels", false, "also select nodes on the Node Feature Discovery TEE labels in the RuntimeClass")
	return cmd
}

func newConfigApplyCmd(g *Globals) *cobra.Command {
	var fl configFlags
	cmd := &cobra.Command{
		Use:   "apply --platform P [--restart]",
		Short: "Write the platform's runtime configuration on this node (root)",
		Long: `apply writes the files render shows, under --root (default /): atomically,
backing up any file it must modify, recording what it owns in
var/lib/berth/config-state.json. A second run changes nothing and says so.
With --restart it restarts the runtime's unit, only if something changed.`,
		Example: `  sudo berth config apply --platform kubeadm-qemu-snp --restart`,
		Args:    NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runConfigApply(cmd.Context(), g, fl) },
	}
	addPlatformFlags(cmd, &fl)
	cmd.Flags().BoolVar(&fl.restart, "restart", false, "restart the container runtime if anything changed")
	return cmd
}

func newConfigRemoveCmd(g *Globals) *cobra.Command {
	var fl configFlags
	cmd := &cobra.Command{
		Use:   "remove --platform P | --all",
		Short: "Remove exactly what berth wrote for a platform, restoring backups",
		Args:  NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runConfigRemove(cmd.Context(), g, fl) },
	}
	f := cmd.Flags()
	f.StringVarP(&fl.platform, "platform", "p", "", "platform to remove")
	f.BoolVar(&fl.all, "all", false, "remove every platform berth configured on this node")
	f.BoolVar(&fl.restart, "restart", false, "restart the container runtime if anything changed")
	return cmd
}

// ParsePlatformFlag parses a required --platform value (exit 2 when bad).
func ParsePlatformFlag(s string) (platform.Platform, error) {
	if s == "" {
		return platform.Platform{}, UsageErr(errors.New("--platform is required: berth never picks a platform for you (berth check lists those this node can run)"))
	}
	p, err := platform.Parse(s)
	if err != nil {
		return platform.Platform{}, UsageErr(fmt.Errorf("--platform: %w", err))
	}
	return p, nil
}

// configPlan discovers the node, refuses a platform whose checks fail
// (unless --force) and renders its files.
func configPlan(ctx context.Context, g *Globals, fl configFlags, root hostfs.Root) (*configure.Rendered, error) {
	p, err := ParsePlatformFlag(fl.platform)
	if err != nil {
		return nil, err
	}
	opt := g.DiscoverOptions(false)
	f := discover.Run(ctx, root, opt)
	if msg, bad, _ := notReady(f, p); bad && fl.force {
		fmt.Fprintf(g.stderr, "warning: --force: %s\n", msg)
	}
	if err := refuseNotReady(f, p, fl.force); err != nil {
		return nil, err
	}
	t, err := targetFor(f, p, fl.configVersion)
	if err != nil {
		return nil, err
	}
	return configure.Render(p, t, configure.Options{Paths: configure.Paths{Prefix: fl.prefix}, TEELabels: fl.teeLabels})
}

// notReady evaluates p's checks on the node and, when p is not ready,
// describes the failing checks.
func notReady(f *facts.Facts, p platform.Platform) (string, bool, error) {
	ev, err := check.NewEvaluator(checks.For(f))
	if err != nil {
		return "", false, fmt.Errorf("internal error in the check catalogue: %w", err)
	}
	vs := ev.Evaluate(f, []platform.Platform{p}, check.Options{})
	if len(vs) == 0 || vs[0].Status != check.NotReady {
		return "", false, nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "platform %s is not ready on this node; failing checks:", p)
	for _, fd := range vs[0].Findings {
		if fd.Status == check.Fail {
			fmt.Fprintf(&b, "\n  - %s: %s", fd.ID, fd.Message)
		}
	}
	return b.String(), true, nil
}

// refuseNotReady refuses a platform whose checks fail on the node, unless
// force; the error lists the failing checks.
func refuseNotReady(f *facts.Facts, p platform.Platform, force bool) error {
	msg, bad, err := notReady(f, p)
	if err != nil || !bad || force {
		return err
	}
	return &exitError{code: ExitNotReady, err: errors.New(msg +
		"\n(berth check --platform " + p.String() + " explains each; --force configures it anyway)")}
}

// targetFor takes from the node's facts what the platform's files depend
// on: the containerd config version and the imports already in place.
func targetFor(f *facts.Facts, p platform.Platform, flagVersion int) (configure.Target, error) {
	l, ok := p.Distribution().Layout()
	if !ok {
		return configure.Target{}, UsageErr(fmt.Errorf("distribution %s has no known runtime layout: berth config supports %s", p.Distribution(), layoutNames()))
	}
	t := configure.Target{LayoutName: p.Distribution().String(), Layout: l}
	if l.Runtime != platform.Containerd {
		return t, nil
	}
	ctr := f.Runtimes.Containerd
	switch {
	case flagVersion == 2 || flagVersion == 3:
		t.ConfigVersion = flagVersion
		t.Facts = append(t.Facts, configure.Fact{What: fmt.Sprintf("containerd config version %d", flagVersion), Source: "--containerd-config-version"})
	case flagVersion != 0:
		return t, UsageErr(fmt.Errorf("--containerd-config-version %d: expected 2 (containerd 1.x) or 3 (containerd 2.x)", flagVersion))
	default:
		ver := ""
		if ctr != nil {
			ver = ctr.Version
		}
		major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(ver, "v"), ".", 2)[0])
		if err != nil || major < 1 || major > 2 {
			return t, UsageErr(fmt.Errorf("%w: containerd version on this node is %q (runtimes.containerd.version): pass --containerd-config-version 2 (containerd 1.x) or 3 (containerd 2.x)",
				configure.ErrUnknownVersion, ver))
		}
		t.ConfigVersion = major + 1
		t.Facts = append(t.Facts, configure.Fact{What: fmt.Sprintf("containerd config version %d", t.ConfigVersion),
			Source: "runtimes.containerd.version = " + ver})
	}
	if ctr != nil && ctr.Layout == t.LayoutName && len(ctr.Imports) > 0 {
		t.Imports = ctr.Imports
		t.Facts = append(t.Facts, configure.Fact{What: "imports of the main config", Source: "runtimes.containerd.imports = " + strings.Join(ctr.Imports, ", ")})
	}
	return t, nil
}

func layoutNames() string {
	var names []string
	for _, d := range platform.Distributions() {
		if _, ok := d.Layout(); ok {
			names = append(names, d.String())
		}
	}
	return strings.Join(names, ", ")
}

func runConfigRender(ctx context.Context, g *Globals, fl configFlags) error {
	root, cleanup, err := g.OpenRoot()
	defer cleanup()
	if err != nil {
		return err
	}
	r, err := configPlan(ctx, g, fl, root)
	if err != nil {
		return err
	}
	files, err := configure.Preview(root.FS(), r)
	if err != nil {
		return err
	}
	rcName := "runtimeclass-" + r.Handler + ".yaml"
	if fl.out == "" {
		for _, f := range files {
			fmt.Fprintf(g.stdout, "==> /%s (%s) <==\n%s\n", f.Path, f.Purpose, f.Content)
		}
		fmt.Fprintf(g.stdout, "==> %s (RuntimeClass) <==\n%s", rcName, r.RuntimeClass)
		return nil
	}
	write := func(rel string, data []byte) error {
		p := filepath.Join(fl.out, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		fmt.Fprintln(g.stdout, p)
		return nil
	}
	for _, f := range files {
		if err := write(f.Path, f.Content); err != nil {
			return err
		}
	}
	return write(rcName, r.RuntimeClass)
}

// writableRoot opens --root for writing; a snapshot cannot be written.
func (g *Globals) writableRoot() (*configure.OSRoot, error) {
	fi, err := os.Stat(g.root)
	if err != nil || !fi.IsDir() {
		return nil, UsageErr(fmt.Errorf("--root %s: apply and remove need a directory (a snapshot cannot be written)", g.root))
	}
	return configure.OpenOSRoot(g.root)
}

func runConfigApply(ctx context.Context, g *Globals, fl configFlags) error {
	root, cleanup, err := g.OpenRoot()
	defer cleanup()
	if err != nil {
		return err
	}
	r, err := configPlan(ctx, g, fl, root)
	if err != nil {
		return err
	}
	w, err := g.writableRoot()
	if err != nil {
		return err
	}
	defer w.Close()
	res, err := configure.Apply(w, r)
	if err != nil {
		return err
	}
	l, _ := r.Platform.Distribution().Layout()
	return reportChange(ctx, g, root, l, res, fl.restart, "applied")
}

// configEditor is what removing berth's runtime configuration works on: the
// host root (to restart the runtime's unit), its writable view, and the
// state of what berth configured there.
type configEditor struct {
	root  hostfs.Root
	w     *configure.OSRoot
	state *configure.State
}

// openConfigEditor opens a configEditor on --root. The returned close
// releases what was opened and must be called even after an error.
func (g *Globals) openConfigEditor() (*configEditor, func(), error) {
	root, cleanup, err := g.OpenRoot()
	if err != nil {
		return nil, cleanup, err
	}
	w, err := g.writableRoot()
	if err != nil {
		return nil, cleanup, err
	}
	closeAll := func() {
		w.Close()
		cleanup()
	}
	st, err := configure.LoadState(w)
	if err != nil {
		return nil, closeAll, err
	}
	return &configEditor{root: root, w: w, state: st}, closeAll, nil
}

// remove removes what berth wrote for handler, restoring backups, and
// reports the change; l names the runtime unit to restart.
func (e *configEditor) remove(ctx context.Context, g *Globals, handler string, l platform.Layout, restart bool) error {
	res, err := configure.Remove(e.w, handler)
	if err != nil {
		return err
	}
	return reportChange(ctx, g, e.root, l, res, restart, "removed")
}

func runConfigRemove(ctx context.Context, g *Globals, fl configFlags) error {
	if fl.all == (fl.platform != "") {
		return UsageErr(errors.New("remove needs exactly one of --platform P or --all"))
	}
	e, closeEditor, err := g.openConfigEditor()
	defer closeEditor()
	if err != nil {
		return err
	}
	var handlers []string
	if fl.all {
		handlers = e.state.Handlers()
	} else {
		p, err := ParsePlatformFlag(fl.platform)
		if err != nil {
			return err
		}
		handlers = []string{p.Name()}
	}
	if len(handlers) == 0 {
		fmt.Fprintln(g.stdout, "nothing to remove: berth has configured no platform on this node")
		return nil
	}
	for _, h := range handlers {
		var l platform.Layout
		if p, err := platform.Parse(e.state.Platforms[h].Platform); err == nil {
			l, _ = p.Distribution().Layout()
		}
		if err := e.remove(ctx, g, h, l, fl.restart); err != nil {
			return err
		}
	}
	return nil
}

// reportChange says what changed and restarts the runtime when asked and
// needed.
func reportChange(ctx context.Context, g *Globals, root hostfs.Root, l platform.Layout, res *configure.Result, restart bool, verb string) error {
	for _, w := range res.Warnings {
		fmt.Fprintln(g.stderr, "warning:", w)
	}
	if len(res.Changed) == 0 {
		fmt.Fprintf(g.stdout, "%s: nothing to change (already %s)\n", res.Handler, verb)
		return nil
	}
	fmt.Fprintf(g.stdout, "%s: %s\n", res.Handler, verb)
	for _, c := range res.Changed {
		fmt.Fprintf(g.stdout, "  /%s\n", c)
	}
	if !restart {
		if len(l.Units) > 0 {
			fmt.Fprintf(g.stdout, "restart %s for the runtime to load it (or pass --restart)\n", l.Units[0])
		}
		return nil
	}
	if !root.Live() {
		fmt.Fprintf(g.stdout, "not restarting: --root %s is not a running system\n", root.Path())
		return nil
	}
	for _, unit := range l.Units {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		res, err := root.Run(rctx, "/usr/bin/systemctl", "is-active", "--quiet", unit)
		cancel()
		if err != nil || res.ExitCode != 0 {
			continue
		}
		rctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		res, err = root.Run(rctx, "/usr/bin/systemctl", "restart", unit)
		cancel()
		if err != nil || res.ExitCode != 0 {
			return fmt.Errorf("systemctl restart %s: %v (exit %d) %s", unit, err, res.ExitCode, res.Stderr)
		}
		fmt.Fprintf(g.stdout, "restarted %s\n", unit)
		return nil
	}
	fmt.Fprintf(g.stderr, "warning: none of %s is active: nothing restarted\n", strings.Join(l.Units, ", "))
	return nil
}
