package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
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
	hypervisor    string
	kataConfigDir string
	// custom are the runtime paths of a custom distribution.
	custom CustomFlags
	// preview (render) shows a platform whose checks fail, with a
	// warning, instead of refusing it.
	preview bool
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

// CustomFlags name the container runtime of a custom distribution, whose
// paths berth cannot know: its config file, systemd unit and socket.
type CustomFlags struct {
	containerdConfig, crioConfig, unit, socket string
}

func (c *CustomFlags) Add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.containerdConfig, "containerd-config", "", "custom distribution: containerd's main config file (berth extends it through an imports drop-in directory conf.d beside it)")
	f.StringVar(&c.crioConfig, "crio-config", "", "custom distribution: CRI-O's main config file (berth writes a drop-in into <file>.d)")
	f.StringVar(&c.unit, "runtime-unit", "", "custom distribution: the runtime's systemd unit, restarted to load the change")
	f.StringVar(&c.socket, "runtime-socket", "", "custom distribution: the runtime's CRI socket (default: the runtime's usual one)")
}

// layout returns the runtime layout a platform is configured with: its
// distribution's, or for custom the one the flags give (nil when p is not
// custom). Flags for a known distribution are a usage error: its paths are
// known.
func (c CustomFlags) Layout(p platform.Platform) (*platform.Layout, error) {
	given := c.containerdConfig != "" || c.crioConfig != "" || c.unit != "" || c.socket != ""
	if !p.Distribution().UserLayout() {
		if given {
			return nil, UsageErr(fmt.Errorf("--containerd-config, --crio-config, --runtime-unit and --runtime-socket are for the custom distribution; %s keeps its runtime at known paths", p.Distribution()))
		}
		return nil, nil
	}
	var l platform.Layout
	var err error
	switch {
	case c.containerdConfig != "" && c.crioConfig != "":
		return nil, UsageErr(errors.New("--containerd-config and --crio-config: give one, the runtime the node runs"))
	case c.containerdConfig != "":
		l, err = platform.CustomLayout(platform.Containerd, c.containerdConfig, c.socket, c.unit)
	case c.crioConfig != "":
		l, err = platform.CustomLayout(platform.CRIO, c.crioConfig, c.socket, c.unit)
	default:
		return nil, UsageErr(fmt.Errorf("platform %s is for a custom distribution: give its runtime's config file (--containerd-config or --crio-config) and unit (--runtime-unit)", p))
	}
	if err != nil {
		return nil, UsageErr(err)
	}
	return &l, nil
}

func addPlatformFlags(cmd *cobra.Command, fl *configFlags) {
	fl.custom.Add(cmd)
	f := cmd.Flags()
	f.StringVarP(&fl.platform, "platform", "p", "", "platform to configure (canonical name, Kata runtime class or Contrast name)")
	f.StringVar(&fl.prefix, "prefix", configure.DefaultPrefix, "where Kata's binaries and guest images are installed")
	f.StringVar(&fl.kataConfigDir, "kata-config-dir", "", "directory for the Kata configuration file (default <prefix>/etc/kata)")
	f.StringVar(&fl.hypervisor, "hypervisor-path", "", "run this hypervisor binary (e.g. a distribution's QEMU, probed by berth check --hypervisor-path) instead of the one under --prefix")
	f.IntVar(&fl.configVersion, "containerd-config-version", 0, "containerd config version to write (2 for containerd 1.x, 3 for 2.0-2.2, 4 for 2.3 and later) when the node's containerd version is unknown")
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
	fl.preview = true
	// Accepted and ignored, for scripts written when render needed it.
	cmd.Flags().BoolVar(&fl.force, "force", false, "no effect: render shows a platform whose checks fail, with a warning")
	_ = cmd.Flags().MarkHidden("force")
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
var/lib/berth/config-state.json, under an exclusive lock on the host root. A
second run changes nothing and says so.

With --restart (on a running system), if something changed, it restarts the
runtime's unit, waits for its CRI socket and checks that the new handler and
every handler that was live before are live; if not, it puts the previous
files back, restarts again, checks the old handlers are back and exits 1
naming what broke. Without --restart it prints the commands that load and
verify the change.`,
		Example: `  sudo berth config apply --platform kubeadm-qemu-snp --restart`,
		Args:    NoArgs,
		RunE:    func(cmd *cobra.Command, _ []string) error { return runConfigApply(cmd.Context(), g, fl) },
	}
	addPlatformFlags(cmd, &fl)
	cmd.Flags().BoolVar(&fl.force, "force", false, "configure the platform even though its checks fail on this node")
	cmd.Flags().BoolVar(&fl.restart, "restart", false, "restart the container runtime if anything changed, verify every handler, and roll back if one is lost")
	return cmd
}

func newConfigRemoveCmd(g *Globals) *cobra.Command {
	var fl configFlags
	cmd := &cobra.Command{
		Use:   "remove --platform P | --all",
		Short: "Remove exactly what berth wrote for a platform, restoring backups",
		Long: `remove takes out exactly what berth wrote for the platform (or --all),
restores the files it modified byte for byte and removes the directories it
created once they are empty. With --restart it restarts the runtime's unit
and checks that every other handler is still live, rolling back if not.`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runConfigRemove(cmd.Context(), g, fl) },
	}
	f := cmd.Flags()
	f.StringVarP(&fl.platform, "platform", "p", "", "platform to remove")
	f.BoolVar(&fl.all, "all", false, "remove every platform berth configured on this node")
	f.BoolVar(&fl.restart, "restart", false, "restart the container runtime if anything changed, verify every other handler, and roll back if one is lost")
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
	custom, err := fl.custom.Layout(p)
	if err != nil {
		return nil, err
	}
	if fl.kataConfigDir != "" && !strings.HasPrefix(fl.kataConfigDir, "/") {
		return nil, UsageErr(fmt.Errorf("--kata-config-dir %q: expected an absolute path on the host", fl.kataConfigDir))
	}
	if fl.hypervisor != "" && (!strings.HasPrefix(fl.hypervisor, "/") || p.HypervisorBinary() == "") {
		return nil, UsageErr(fmt.Errorf("--hypervisor-path %q: expected an absolute path of the platform's hypervisor binary (%s has none of its own)", fl.hypervisor, p))
	}
	opt := g.DiscoverOptions(false)
	opt.Layout = custom
	f := discover.Run(ctx, root, opt)
	switch msg, bad, _ := notReady(f, p); {
	case bad && fl.preview:
		fmt.Fprintf(g.stderr, "warning: %s\n(render only shows the files; apply refuses this platform unless --force)\n", msg)
	case bad && fl.force:
		fmt.Fprintf(g.stderr, "warning: --force: %s\n", msg)
	}
	if !fl.preview {
		if err := RefuseNotReady(f, p, fl.force); err != nil {
			return nil, err
		}
	}
	t, err := TargetForLayout(f, p, custom, fl.configVersion)
	if err != nil {
		return nil, err
	}
	r, err := configure.Render(p, t, configure.Options{Paths: configure.Paths{Prefix: fl.prefix, Hypervisor: fl.hypervisor, KataConfigDir: fl.kataConfigDir}, TEELabels: fl.teeLabels})
	return r, configErr(err)
}

// configErr gives a refusal of configure (a file that does not parse, a
// runtime that would break) exit 1: the node needs fixing, not the
// command line.
func configErr(err error) error {
	if err != nil && configure.IsRefused(err) {
		return ExitErr(ExitNotReady, err)
	}
	return err
}

// notReady evaluates p's checks on the node and, when p is not ready,
// describes the failing checks.
func notReady(f *facts.Facts, p platform.Platform) (string, bool, error) {
	ev, err := check.NewEvaluator(catalog.For(f))
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
func RefuseNotReady(f *facts.Facts, p platform.Platform, force bool) error {
	msg, bad, err := notReady(f, p)
	if err != nil || !bad || force {
		return err
	}
	return &exitError{code: ExitNotReady, err: errors.New(msg +
		"\n(berth check --platform " + p.String() + " explains each; --force configures it anyway)")}
}

// targetFor takes from the node's facts what the platform's files depend
// on (configure.TargetFor); a bad flag or an unknown version is a usage
// error, a config the runtime cannot read a refusal.
// targetForLayout is targetFor with a custom distribution's layout (nil
// for the others).
func TargetForLayout(f *facts.Facts, p platform.Platform, custom *platform.Layout, flagVersion int) (configure.Target, error) {
	if custom == nil {
		return targetFor(f, p, flagVersion)
	}
	t, err := configure.TargetForLayout(f, p, *custom, flagVersion)
	if err == nil || configure.IsRefused(err) {
		return t, configErr(err)
	}
	return t, UsageErr(err)
}

func targetFor(f *facts.Facts, p platform.Platform, flagVersion int) (configure.Target, error) {
	t, err := configure.TargetFor(f, p, flagVersion)
	if err == nil || configure.IsRefused(err) {
		return t, configErr(err)
	}
	if _, ok := p.Distribution().Layout(); !ok {
		err = fmt.Errorf("%w: berth config supports %s, and custom with --containerd-config or --crio-config and --runtime-unit", err, layoutNames())
	}
	return t, UsageErr(err)
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
		return configErr(err)
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
func (g *Globals) WritableRoot() (*configure.OSRoot, error) {
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
	w, err := g.WritableRoot()
	if err != nil {
		return err
	}
	defer w.Close()
	l, _ := r.Platform.Distribution().Layout()
	if r.Layout != nil {
		l = *r.Layout
	}
	if fl.restart {
		if rt, ok := g.LiveRuntime(ctx, root, l, r.Platform); ok {
			res, err := configure.ApplyLive(ctx, w, r, rt)
			return g.reportLive(res, err, "applied")
		}
	}
	res, err := configure.Apply(w, r)
	if err != nil {
		return configErr(err)
	}
	return g.ReportNoRestart(res, l, r.Platform, "applied")
}

// configEditor is what removing berth's runtime configuration works on: the
// host root (to restart the runtime's unit), its writable view, and the
// state of what berth configured there.
type configEditor struct {
	root  hostfs.Root
	w     *configure.OSRoot
	state *configure.State
}

// RemovePlatformConfigs removes the runtime configuration berth applied
// for each of plats (platform names, as an installation record lists
// them) that the configuration state still holds, restarting the runtime
// when restart is set: uninstall's first step.
func (g *Globals) RemovePlatformConfigs(ctx context.Context, plats []string, restart bool) error {
	e, closeEditor, err := g.openConfigEditor()
	defer closeEditor()
	if err != nil {
		return err
	}
	for _, s := range plats {
		p, err := platform.Parse(s)
		if err != nil {
			return fmt.Errorf("installation record names platform %q: %w", s, err)
		}
		if _, ok := e.state.Platforms[p.Handler()]; !ok {
			continue
		}
		if err := e.remove(ctx, g, p.Handler(), p, restart); err != nil {
			return err
		}
	}
	return nil
}

// openConfigEditor opens a configEditor on --root. The returned close
// releases what was opened and must be called even after an error.
func (g *Globals) openConfigEditor() (*configEditor, func(), error) {
	root, cleanup, err := g.OpenRoot()
	if err != nil {
		return nil, cleanup, err
	}
	w, err := g.WritableRoot()
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
func (e *configEditor) remove(ctx context.Context, g *Globals, handler string, p platform.Platform, restart bool) error {
	l, _ := p.Distribution().Layout()
	if st, ok := e.state.Platforms[handler]; ok && st.Layout != nil {
		// A custom distribution's paths, as given when it was applied.
		l = *st.Layout
	}
	if restart {
		if rt, ok := g.LiveRuntime(ctx, e.root, l, p); ok {
			res, err := configure.RemoveLive(ctx, e.w, handler, rt)
			return g.reportLive(res, err, "removed")
		}
	}
	res, err := configure.Remove(e.w, handler)
	if err != nil {
		return configErr(err)
	}
	return g.ReportNoRestart(res, l, p, "removed")
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
		handlers = []string{p.Handler()}
	}
	if len(handlers) == 0 {
		fmt.Fprintln(g.stdout, "nothing to remove: berth has configured no platform on this node")
		return nil
	}
	for _, h := range handlers {
		p, err := platform.Parse(e.state.Platforms[h].Platform)
		if err != nil {
			if p, err = platform.Parse(h); err != nil {
				return fmt.Errorf("%s: the state names platform %q, which berth no longer knows: %w", configure.StatePath, e.state.Platforms[h].Platform, err)
			}
		}
		if err := e.remove(ctx, g, h, p, fl.restart); err != nil {
			return err
		}
	}
	return nil
}

// unitRuntime is the runtime of a live host as configure.ApplyLive drives
// it: its systemd unit, restarted with systemctl, asked over CRI through
// verify (berth-cluster, which links gRPC), its log read from the journal.
type unitRuntime struct {
	g    *Globals
	root hostfs.Root
	unit string
	p    platform.Platform
	// wait bounds how long Handlers waits for the CRI socket to answer.
	wait time.Duration
}

func (u unitRuntime) Name() string { return u.unit }

func (u unitRuntime) Restart(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	res, err := u.root.Run(rctx, "/usr/bin/systemctl", "restart", u.unit)
	if err != nil {
		return fmt.Errorf("systemctl restart %s: %w", u.unit, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("systemctl restart %s: exit %d: %s", u.unit, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

func (u unitRuntime) Handlers(ctx context.Context) ([]string, error) {
	deadline := time.Now().Add(u.wait)
	for {
		v, err := u.g.VerifyPlatform(ctx, u.p)
		if err == nil && v.Runtime != "" {
			return v.Handlers, nil
		}
		if err == nil {
			err = errors.New(v.Error)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func (u unitRuntime) Log(ctx context.Context) string {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// containerd writes logrus lines to stderr, which the journal stores
	// at priority info: its level is in the text, not the priority.
	res, err := u.root.Run(rctx, "/usr/bin/journalctl", "-u", u.unit, "--since", "-2min", "--no-pager", "-o", "cat")
	if err != nil || res.ExitCode != 0 {
		return ""
	}
	return configure.ProblemLines(string(res.Stdout), 10)
}

// liveRuntime is the runtime --restart restarts: the first active unit of
// the layout on a running system. ok is false (with a warning said) when
// there is none, and the change is then made without a restart.
func (g *Globals) LiveRuntime(ctx context.Context, root hostfs.Root, l platform.Layout, p platform.Platform) (configure.Runtime, bool) {
	if !root.Live() {
		fmt.Fprintf(g.stderr, "warning: not restarting: --root %s is not a running system\n", root.Path())
		return nil, false
	}
	for _, unit := range l.Units {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := root.Run(rctx, "/usr/bin/systemctl", "is-active", "--quiet", unit)
		cancel()
		if err == nil && res.ExitCode == 0 {
			return unitRuntime{g: g, root: root, unit: unit, p: p, wait: time.Minute}, true
		}
	}
	fmt.Fprintf(g.stderr, "warning: none of %s is active: nothing restarted\n", strings.Join(l.Units, ", "))
	return nil, false
}

// reportLive says what a live apply or remove did; a rollback is exit 1.
func (g *Globals) reportLive(res *configure.LiveResult, err error, verb string) error {
	if err != nil {
		if res != nil && res.Result != nil {
			g.warn(res.Result)
		}
		return configErr(err)
	}
	if g.SayChanged(res.Result, verb) {
		fmt.Fprintf(g.stdout, "restarted; live handlers: %s\n", strings.Join(res.After, ", "))
	}
	return nil
}

// reportNoRestart says what changed and the exact commands that load and
// verify it.
func (g *Globals) ReportNoRestart(res *configure.Result, l platform.Layout, p platform.Platform, verb string) error {
	if g.SayChanged(res, verb) && len(l.Units) > 0 {
		fmt.Fprintf(g.stdout, "to load it: systemctl restart %s && berth verify --platform %s\n(or run again with --restart, which also rolls back if a handler is lost)\n", l.Units[0], p)
	}
	return nil
}

func (g *Globals) warn(res *configure.Result) {
	for _, w := range res.Warnings {
		fmt.Fprintln(g.stderr, "warning:", w)
	}
}

// sayChanged prints res's warnings and changed files; false when nothing
// changed.
func (g *Globals) SayChanged(res *configure.Result, verb string) bool {
	g.warn(res)
	if len(res.Changed) == 0 {
		fmt.Fprintf(g.stdout, "%s: nothing to change (already %s)\n", res.Handler, verb)
		return false
	}
	fmt.Fprintf(g.stdout, "%s: %s\n", res.Handler, verb)
	for _, c := range res.Changed {
		fmt.Fprintf(g.stdout, "  /%s\n", c)
	}
	return true
}
