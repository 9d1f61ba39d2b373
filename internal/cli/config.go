package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/runtimectl"
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
	// suffix is --install-suffix: the side-by-side install whose handler
	// is rendered, applied or removed (parsed in configPlan and remove).
	suffix string
	// custom are the runtime paths of a custom distribution.
	custom CustomFlags
	// preview (render) shows a platform whose checks fail, with a
	// warning, instead of refusing it.
	preview bool
	// kata is the operator's tuning of the Kata configuration, and
	// customRuntime the name of the custom runtime made from --platform.
	kata          KataFlags
	customRuntime string
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

// Add adds the flags to cmd: every command that configures or checks a
// runtime takes the same names for it.
func (c *CustomFlags) Add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.containerdConfig, "containerd-config", "", "custom distribution: containerd's main config file (berth extends it through an imports drop-in directory conf.d beside it)")
	f.StringVar(&c.crioConfig, "crio-config", "", "custom distribution: CRI-O's main config file (berth writes a drop-in into <file>.d)")
	f.StringVar(&c.unit, "runtime-unit", "", "custom distribution: the runtime's systemd unit, restarted to load the change")
	f.StringVar(&c.socket, "runtime-socket", "", "custom distribution: the runtime's CRI socket (default: the runtime's usual one)")
}

// Layout returns the runtime layout a platform is configured with: its
// distribution's, or for custom the one the flags give (nil when p is not
// custom). Flags for a known distribution are a usage error: berth knows
// its paths, and a second source of them could only disagree.
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
	f.StringVar(&fl.prefix, "prefix", "", "where Kata's binaries and guest images are installed (default "+configure.DefaultPrefix+", "+configure.DefaultPrefix+"-<suffix> with --install-suffix)")
	f.StringVar(&fl.kataConfigDir, "kata-config-dir", "", "directory for the Kata configuration file (default <prefix>/etc/kata)")
	f.StringVar(&fl.hypervisor, "hypervisor-path", "", "run this hypervisor binary (e.g. a distribution's QEMU, probed by berth check --hypervisor-path) instead of the one under --prefix")
	AddSuffixFlag(cmd, &fl.suffix)
	fl.kata.Add(cmd)
	f.StringVar(&fl.customRuntime, "custom-runtime", "", "configure a custom runtime of this name made from --platform (kata-deploy's customRuntimes): its own handler, Kata configuration and RuntimeClass, with --kata-drop-in NAME=FILE")
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

With --restart (on a running system), unless nothing changed and the
handler is live already, it restarts the runtime's unit, waits for its CRI
socket and checks that the new handler and every handler that was live
before are live; if not, it puts the previous files back, restarts again,
checks the old handlers are back and exits 1 naming what broke. Before any
restart the runtime's own binary loads the whole configuration (containerd
config dump): one that would not load is refused (exit 1) before anything
changes, --force or not. Without --restart it prints the commands that load
and verify the change.

A run that was killed is completed first by the next one (its journal,
var/lib/berth/config-intent.json): forward when all its files are in place,
else back to the originals.`,
		Example: `  sudo berth config apply --platform kubeadm-qemu-snp --restart`,
		Args:    NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return outsideRoot(runConfigApply(cmd.Context(), g, fl), g.root)
		},
	}
	addPlatformFlags(cmd, &fl)
	cmd.Flags().BoolVar(&fl.force, "force", false, "configure the platform even though its checks fail on this node")
	cmd.Flags().BoolVar(&fl.restart, "restart", false, "restart the container runtime unless nothing changed and the handler is live, verify every handler, and roll back if one is lost")
	return cmd
}

func newConfigRemoveCmd(g *Globals) *cobra.Command {
	var fl configFlags
	cmd := &cobra.Command{
		Use:   "remove --platform P | --all",
		Short: "Remove exactly what berth wrote for a platform, restoring backups",
		Long: `remove takes out exactly what berth wrote for the platform (or --all),
restores the files it modified byte for byte and removes the directories it
created once they are empty. With --restart, unless nothing changed and the
handler is gone from the runtime already, it restarts the runtime's unit and
checks that every other handler is still live, rolling back if not. A run
that was killed is completed first, so --all restores the originals byte for
byte after a kill at any step.

On a running system (--root / or --live) it first asks the runtime over
CRI which pods run on the handlers it would remove, and refuses (exit 1,
nothing changed) while any does, naming them (namespace/name, up to 10 and
a count), or while the runtime cannot be asked; --force removes anyway and
says what it overrode.`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return outsideRoot(runConfigRemove(cmd.Context(), g, fl), g.root)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&fl.platform, "platform", "p", "", "platform to remove")
	f.BoolVar(&fl.all, "all", false, "remove every platform berth configured on this node (for --install-suffix, of that install only)")
	f.StringVar(&fl.customRuntime, "custom-runtime", "", "remove the custom runtime of this name (made from --platform) instead of the platform's own handler")
	AddSuffixFlag(cmd, &fl.suffix)
	f.BoolVar(&fl.restart, "restart", false, "restart the container runtime unless nothing changed and the handler is gone, verify every other handler, and roll back if one is lost")
	f.BoolVar(&fl.force, "force", false, "remove even while pods run on the handler on this node, or when the runtime cannot say which do")
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

// configPlan checks the flags and plans the platform's files on the node
// (configure.Plan): a platform whose checks fail is refused unless
// --force, and shown with a warning by render.
func configPlan(ctx context.Context, g *Globals, fl configFlags, root hostfs.Root) (*configure.Rendered, error) {
	p, err := ParsePlatformFlag(fl.platform)
	if err != nil {
		return nil, err
	}
	in, err := configure.NewInstall(configure.InstallFlags{Suffix: fl.suffix, Prefix: fl.prefix, KataConfigDir: fl.kataConfigDir}, p)
	if err != nil {
		return nil, err
	}
	custom, err := fl.custom.Layout(p)
	if err != nil {
		return nil, err
	}
	if fl.hypervisor != "" && (!strings.HasPrefix(fl.hypervisor, "/") || p.HypervisorBinary() == "") {
		return nil, UsageErr(fmt.Errorf("--hypervisor-path %q: expected an absolute path of the platform's hypervisor binary (%s has none of its own)", fl.hypervisor, p))
	}
	if err := (configure.Paths{Prefix: fl.prefix, Hypervisor: fl.hypervisor, KataConfigDir: fl.kataConfigDir}).Check(); err != nil {
		return nil, UsageErr(err)
	}
	var customs []string
	if fl.customRuntime != "" {
		if err := configure.CheckCustomName(fl.customRuntime); err != nil {
			return nil, UsageErr(err)
		}
		customs = []string{fl.customRuntime}
	}
	kata, err := fl.kata.For(p, fl.customRuntime, []platform.Platform{p}, customs)
	if err != nil {
		return nil, err
	}
	paths := in.Paths(fl.hypervisor)
	paths.Custom = fl.customRuntime
	r, nr, err := configure.Plan(ctx, root, configure.PlanRequest{
		Platform: p, Custom: custom, ConfigVersion: fl.configVersion, Discover: g.DiscoverOptions(false),
		Options: configure.Options{Paths: paths, TEELabels: fl.teeLabels, Kata: kata},
		Force:   fl.preview || fl.force,
	})
	switch {
	case nr != nil && fl.preview:
		fmt.Fprintf(g.stderr, "warning: %s\n(render only shows the files; apply refuses this platform unless --force)\n", nr)
	case nr != nil && fl.force:
		fmt.Fprintf(g.stderr, "warning: --force: %s\n", nr)
	}
	if err != nil {
		return nil, planErr(err, p, custom)
	}
	return r, nil
}

// planErr gives configure's errors their exit codes: a platform not ready
// and a refusal 1, what the facts cannot tell without a flag 2.
func planErr(err error, p platform.Platform, custom *platform.Layout) error {
	var nr *configure.NotReadyError
	var te *configure.TargetError
	switch {
	case errors.As(err, &nr) && nr.Unforceable():
		return errdefs.NotReady(errors.New(nr.Error() +
			"\n(berth check --platform " + p.String() + " explains each; --force does not override a runtime configuration that does not parse: the runtime would not start on it)"))
	case errors.As(err, &nr):
		return errdefs.NotReady(errors.New(nr.Error() +
			"\n(berth check --platform " + p.String() + " explains each; --force configures it anyway)"))
	case errors.As(err, &te):
		if _, ok := p.Distribution().Layout(); !ok && custom == nil {
			err = fmt.Errorf("%w: berth config supports %s, and custom with --containerd-config or --crio-config and --runtime-unit", err, layoutNames())
		}
		return UsageErr(err)
	}
	return err
}

// RefuseNotReady refuses a platform whose checks fail on the node, unless
// force: configuring it would give the node a handler that cannot run a
// pod. force never overrides a runtime configuration that does not parse.
// The error lists the failing checks.
func RefuseNotReady(f *facts.Facts, p platform.Platform, force bool) error {
	err := configure.Readiness(f, p)
	if err == nil {
		return nil
	}
	if nr := (*configure.NotReadyError)(nil); force && !(errors.As(err, &nr) && nr.Unforceable()) {
		return nil
	}
	return planErr(err, p, nil)
}

// TargetForLayout takes from the node's facts what the platform's files
// depend on (configure.TargetFor), with a custom distribution's layout
// (nil for the others): a bad flag or an unknown version is a usage
// error, a config the runtime cannot read a refusal, so that the exit
// code says who must act.
func TargetForLayout(f *facts.Facts, p platform.Platform, custom *platform.Layout, flagVersion int) (configure.Target, error) {
	var t configure.Target
	var err error
	if custom == nil {
		t, err = configure.TargetFor(f, p, flagVersion)
	} else {
		t, err = configure.TargetForLayout(f, p, *custom, flagVersion)
	}
	if err != nil && !configure.IsRefused(err) {
		err = &configure.TargetError{Err: err}
	}
	return t, planErr(err, p, custom)
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
	// Every file goes through an os.Root at --out: no symlink inside it
	// leads a write out of it, and each file is replaced by a rename
	// (hostfs.WriteAtomic), so a link planted at a file's name is
	// replaced, never written through.
	if err := os.MkdirAll(fl.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	out, err := os.OpenRoot(fl.out)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	defer out.Close()
	write := func(rel string, data []byte) error {
		err := out.MkdirAll(path.Dir(rel), 0o755)
		if err == nil {
			err = hostfs.WriteAtomic(hostfs.RootFS(out), rel, data, 0o644)
		}
		if err != nil && strings.Contains(err.Error(), "path escapes from parent") {
			// os.Root's refusal: a symlink on the way leaves the directory.
			return errdefs.Refused(fmt.Errorf("--out %s: refusing to write %s: a symlink on its way leads out of %s (%w)", fl.out, rel, fl.out, err))
		}
		if err != nil {
			return fmt.Errorf("--out %s: %w", fl.out, err)
		}
		fmt.Fprintln(g.stdout, filepath.Join(fl.out, filepath.FromSlash(rel)))
		return nil
	}
	for _, f := range files {
		if err := write(f.Path, f.Content); err != nil {
			return err
		}
	}
	return write(rcName, r.RuntimeClass)
}

// Writable opens --root for writing, once per command (a second call
// returns the same root; it is closed when the command ends). A snapshot,
// or anything else that is not a directory, is a usage error: its files
// are a copy, and writing them would configure no node.
func (g *Globals) Writable() (*hostfs.Writable, error) {
	if g.writable != nil {
		return g.writable, nil
	}
	w, err := hostfs.OpenWritable(g.root)
	if err != nil {
		return nil, UsageErr(fmt.Errorf("--root: %w", err))
	}
	g.writable = w
	return w, nil
}

// closeWritable closes what Writable opened.
func (g *Globals) closeWritable() {
	if g.writable != nil {
		g.writable.Close()
		g.writable = nil
	}
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
	w, err := g.Writable()
	if err != nil {
		return err
	}
	return g.RuntimeChange(root, w, fl.restart, r.Suffix).Apply(ctx, r)
}

// RuntimeChange is how berth changes the runtime configuration of the
// host at root (w its writable view): restarting the runtime with the
// host's systemctl when restart is set, and asking it through berth
// verify, since berth links no gRPC. suffix is the side-by-side install
// changed: verify then looks for its handlers, not the unsuffixed ones.
func (g *Globals) RuntimeChange(root hostfs.Root, w configure.FS, restart bool, suffix configure.Suffix) runtimectl.Change {
	return runtimectl.Change{Host: root, FS: w, Restart: restart, Suffix: suffix, Options: g.ChangeOptions(),
		Ask:         func(p platform.Platform) runtimectl.Ask { return g.askVerify(p, suffix) },
		Snapshotter: func(p platform.Platform) func(context.Context, string) error { return g.proveSnapshotter(p, suffix) },
		// Each question through verify may start a berth-cluster process.
		Poll: 500 * time.Millisecond, Out: g.stdout, Err: g.stderr}
}

// ChangeOptions are the options of every runtime configuration change
// (none in the shipped binary; the fault suite's kill points in a build
// with -tags berthtest).
func (g *Globals) ChangeOptions() []configure.Option { return changeOptions(g) }

// askVerify asks the runtime through berth verify whether p's handler is
// live.
func (g *Globals) askVerify(p platform.Platform, suffix configure.Suffix) runtimectl.Ask {
	return func(ctx context.Context) (runtimectl.Status, error) {
		v, err := g.VerifyPlatform(ctx, p, suffix)
		if err == nil && v.Runtime != "" {
			return runtimectl.Status{Handlers: v.Handlers}, nil
		}
		if err == nil {
			err = errors.New(v.Error)
		}
		return runtimectl.Status{}, err
	}
}

// proveSnapshotter proves p's proxy snapshotter through berth verify
// --snapshotter, which berth-cluster runs (berth links no gRPC).
func (g *Globals) proveSnapshotter(p platform.Platform, suffix configure.Suffix) func(ctx context.Context, name string) error {
	return func(ctx context.Context, name string) error {
		v, err := g.VerifyPlatform(ctx, p, suffix)
		switch {
		case err != nil:
			return err
		case v.SnapshotterError != "":
			return errors.New(v.SnapshotterError)
		case v.Snapshotter != name:
			return fmt.Errorf("berth verify proved snapshotter %q, not %s (%s)", v.Snapshotter, name, v.Error)
		}
		return nil
	}
}

// RemovePlatformConfigs removes the runtime configuration berth applied
// for each of plats (platform names, as an installation record lists
// them) that the configuration state still holds, restarting the runtime
// when restart is set: uninstall's first step.
func (g *Globals) RemovePlatformConfigs(ctx context.Context, plats []string, suffix configure.Suffix, restart bool) error {
	ch, st, closeAll, err := g.openRemoval(restart, suffix)
	defer closeAll()
	if err != nil {
		return err
	}
	return ch.RemovePlatforms(ctx, st, plats)
}

// openRemoval opens --root for removing berth's runtime configuration and
// loads the state of what berth configured there. The returned close
// releases what was opened and must be called even after an error.
func (g *Globals) openRemoval(restart bool, suffix configure.Suffix) (runtimectl.Change, *configure.State, func(), error) {
	root, cleanup, err := g.OpenRoot()
	if err != nil {
		return runtimectl.Change{}, nil, cleanup, err
	}
	w, err := g.Writable()
	if err != nil {
		return runtimectl.Change{}, nil, cleanup, err
	}
	closeAll := cleanup
	// A killed run is completed first: the state it left is what lists
	// the handlers to remove.
	said, err := configure.Recover(w)
	if err != nil {
		return runtimectl.Change{}, nil, closeAll, err
	}
	for _, s := range said {
		fmt.Fprintln(g.stderr, "warning:", s)
	}
	st, err := configure.LoadState(w)
	if err != nil {
		return runtimectl.Change{}, nil, closeAll, err
	}
	if in, err := configure.ReadIntent(w); err == nil && in != nil && restart {
		// A remove whose files are gone but whose restart is owed: its
		// handler is removed (proven gone) again.
		for _, p := range in.Pending {
			if _, ok := st.Platforms[p.Handler]; !ok && p.Gone && p.Suffix == string(suffix) {
				st.Platforms[p.Handler] = configure.PlatformState{Platform: p.Platform, Suffix: p.Suffix}
			}
		}
	}
	return g.RuntimeChange(root, w, restart, suffix), st, closeAll, nil
}

func runConfigRemove(ctx context.Context, g *Globals, fl configFlags) error {
	if fl.all == (fl.platform != "") {
		return UsageErr(errors.New("remove needs exactly one of --platform P or --all"))
	}
	suffix, err := ParseSuffixFlag(fl.suffix)
	if err != nil {
		return err
	}
	ch, st, closeAll, err := g.openRemoval(fl.restart, suffix)
	defer closeAll()
	if err != nil {
		return err
	}
	var handlers []string
	if fl.all {
		// One install's handlers: those of other suffixes stay live.
		handlers = st.HandlersOf(suffix)
	} else {
		p, err := ParsePlatformFlag(fl.platform)
		if err != nil {
			return err
		}
		h := suffix.Handler(p)
		if fl.customRuntime != "" {
			if err := configure.CheckCustomName(fl.customRuntime); err != nil {
				return UsageErr(err)
			}
			h = suffix.Of(fl.customRuntime)
		}
		handlers = []string{h}
		if _, ok := st.Platforms[h]; !ok {
			// Not berth's (any more): remove proves it gone with --restart.
			st.Platforms[h] = configure.PlatformState{Platform: p.String(), Suffix: string(suffix)}
		}
	}
	if len(handlers) == 0 {
		fmt.Fprintln(g.stdout, "nothing to remove: berth has configured no platform on this node")
		return nil
	}
	var rs []Removal
	for _, h := range handlers {
		p, err := platform.Parse(st.Platforms[h].Platform)
		if err != nil {
			return fmt.Errorf("berth's configuration state names platform %q for handler %s: %w", st.Platforms[h].Platform, h, err)
		}
		rs = append(rs, Removal{Platform: p, Handler: h})
	}
	if err := g.GuardRemoval(ctx, rs, suffix, st, fl.force); err != nil {
		return err
	}
	return ch.RemoveHandlers(ctx, st, handlers)
}

// AddSuffixFlag adds --install-suffix, the side-by-side install a command
// works on.
func AddSuffixFlag(cmd *cobra.Command, s *string) {
	cmd.Flags().StringVar(s, "install-suffix", "", "side-by-side install: appended to handler and RuntimeClass names, the default prefix and berth's files (a DNS label of at most "+fmt.Sprint(configure.MaxSuffixLen)+" characters; default none)")
}

// ParseSuffixFlag validates an --install-suffix value (exit 2 when bad),
// for a command that works on an install's names but not its paths;
// configure.NewInstall is the one check.
func ParseSuffixFlag(s string, plats ...platform.Platform) (configure.Suffix, error) {
	in, err := configure.NewInstall(configure.InstallFlags{Suffix: s}, plats...)
	return in.Suffix, err
}

// outsideRoot names the refusal of a path os.Root would not follow: a
// symlink on its way leads out of --root. os.Root says only "path escapes
// from parent", which tells the user neither that berth refused nor why;
// the refusal exits 1 (errdefs.ErrRefused) like every other.
func outsideRoot(err error, root string) error {
	var pe *fs.PathError
	if err == nil || !errors.As(err, &pe) || pe.Err == nil || pe.Err.Error() != "path escapes from parent" {
		return err
	}
	return errdefs.Refused(fmt.Errorf("refusing /%s: a symlink on its way leads outside the host root (--root %s), and berth reads and writes only inside it", strings.TrimPrefix(pe.Path, "/"), root))
}
