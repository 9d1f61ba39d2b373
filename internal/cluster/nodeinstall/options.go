package nodeinstall

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/internal/node/podguard"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/node/runtimectl/systemdbus"
	"berth.dev/berth/platform"
)

// Options are the node-installer's settings as the operator gave them
// (its flags), before anything is opened: Check turns them into Settings
// without a cluster or a host, so that a bad flag is refused first.
type Options struct {
	// Mode is install or cleanup; "" is $BERTH_NODE_INSTALLER_MODE, else
	// install.
	Mode string
	// NodeName is this node; "" is $NODE_NAME.
	NodeName string
	// Platforms are the chosen platforms (install mode needs one).
	Platforms []platform.Platform
	// Manifest is the component manifest, pinned (PATH@sha256:<hex> or
	// URL@sha256:<hex>); install mode needs it.
	Manifest string
	// Prefix and KataConfigDir are absolute paths on the host; "" Prefix
	// is configure.DefaultPrefix, suffixed with Suffix.
	Prefix, KataConfigDir string
	// Suffix is --install-suffix: this release's side-by-side install
	// (configure.Suffix), "" the unsuffixed one.
	Suffix string
	// ContainerdConfig, CRIOConfig and RuntimeUnit are the custom
	// distribution's runtime; RuntimeSocket overrides any layout's CRI
	// socket.
	ContainerdConfig, CRIOConfig, RuntimeUnit, RuntimeSocket string
	// SystemdSocket is systemd's private socket on the host.
	SystemdSocket string
	// ConfigVersion is Config.ConfigVersion.
	ConfigVersion int
	// KataDeployLabels is Config.KataDeployLabels.
	KataDeployLabels bool
	// RestartLease is NAMESPACE/NAME of the restart Lease ("" none).
	RestartLease string
	// MaxConcurrentRestarts is how many nodes may hold the restart Lease
	// at once (RestartLease.Slots; 0: 1).
	MaxConcurrentRestarts int
	// Parallel is Config.Parallel.
	Parallel int
	// Ignore are the check IDs whose failures become warnings.
	Ignore []string
	// VerifySandbox proves each live handler by starting a pod sandbox
	// with it (Config.Sandbox), within SandboxTimeout (0: 2 min).
	VerifySandbox  bool
	SandboxTimeout time.Duration
	// StartupTaints are KEY[=VALUE]:EFFECT or KEY (any effect), the taints
	// to remove from the Node once every platform is installed.
	StartupTaints []string
	// AdvertiseTEEKeys is Config.AdvertiseTEEKeys.
	AdvertiseTEEKeys bool
	// ContainerdDropIn is a file holding the operator's containerd
	// drop-in (Config.ContainerdDropIn; "": none).
	ContainerdDropIn string
	// Kata and CustomRuntimes are Config.Kata and Config.CustomRuntimes,
	// checked by the command line.
	Kata           map[string]configure.KataOptions
	CustomRuntimes []configure.CustomRuntime
	// ForceRemove is Config.ForceRemove: remove platforms even while pods
	// run on their handlers.
	ForceRemove bool
	// Getenv reads the environment the defaults come from; nil reads
	// none.
	Getenv func(string) string
}

// IsUsage reports whether err says the Options were wrong, as opposed to
// the node, the cluster or the network (errdefs.IsUsage).
func IsUsage(err error) bool { return errdefs.IsUsage(err) }

// usage marks err as an error in the Options: the command line needs
// fixing (exit 2).
func usage(err error) error { return errdefs.Usage(err) }

// Settings are checked Options.
type Settings struct {
	Mode     Mode
	NodeName string
	// Manifest is the pinned manifest reference (install mode).
	Manifest string
	// Custom is the custom distribution's runtime layout (nil: none).
	Custom *platform.Layout
	// Check are the check options (Ignore).
	Check check.Options
	// LeaseNamespace and LeaseName name the restart Lease ("": none).
	LeaseNamespace, LeaseName string
	// StartupTaints are the startup taints.
	StartupTaints []*StartupTaint
	// ContainerdDropIn is the content of Options.ContainerdDropIn, checked.
	ContainerdDropIn []byte
	// Target is the install, defaulted and validated once
	// (configure.NewInstall).
	Target configure.Install
	// Suffix is Target's suffix.
	Suffix configure.Suffix
	// Prefix is Target's prefix, with its default filled in.
	Prefix string

	opt Options
}

// Check checks o and fills in its defaults; every error is a usage error
// (IsUsage).
func (o Options) Check() (*Settings, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	target, err := configure.NewInstall(configure.InstallFlags{Suffix: o.Suffix, Prefix: o.Prefix, KataConfigDir: o.KataConfigDir}, o.Platforms...)
	if err != nil {
		return nil, err
	}
	s := &Settings{opt: o, NodeName: o.NodeName, Manifest: o.Manifest, Suffix: target.Suffix, Target: target}
	m := o.Mode
	if m == "" {
		m = getenv(ModeEnv)
	}
	if m == "" {
		m = string(ModeInstall)
	}
	mode, err := ParseMode(m)
	if err != nil {
		return nil, usage(err)
	}
	s.Mode = mode
	s.Prefix = target.Prefix
	if s.NodeName == "" {
		s.NodeName = getenv("NODE_NAME")
	}
	if s.NodeName == "" {
		return nil, usage(errors.New("node-installer needs the node name: --node-name or NODE_NAME (the DaemonSet sets it from spec.nodeName)"))
	}
	if mode == ModeInstall {
		if len(o.Platforms) == 0 {
			return nil, usage(errors.New("--platform is required: berth never picks a platform for you"))
		}
		if o.Manifest == "" {
			return nil, usage(errors.New("--manifest is required: PATH@sha256:<hex> or URL@sha256:<hex>"))
		}
		if r, err := manifest.ParseRef(o.Manifest); err != nil || r.SHA256 == "" {
			if err == nil {
				err = fmt.Errorf("--manifest %s is not pinned: every node must install the same release, so give it as %s@sha256:<hex>", o.Manifest, o.Manifest)
			}
			return nil, usage(err)
		}
	}
	if s.Custom, err = o.customLayout(); err != nil {
		return nil, usage(err)
	}
	ignore, err := check.ParseIgnore(o.Ignore, knownCheck)
	if err != nil {
		return nil, usage(err)
	}
	s.Check = check.Options{Ignore: ignore}
	if o.RestartLease != "" {
		ns, name, ok := strings.Cut(o.RestartLease, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return nil, usage(fmt.Errorf("--restart-lease %q: expected NAMESPACE/NAME", o.RestartLease))
		}
		s.LeaseNamespace, s.LeaseName = ns, name
	}
	switch {
	case o.MaxConcurrentRestarts < 0:
		return nil, usage(fmt.Errorf("--max-concurrent-restarts %d: expected 1 or more", o.MaxConcurrentRestarts))
	case o.MaxConcurrentRestarts > 1 && o.RestartLease == "":
		return nil, usage(fmt.Errorf("--max-concurrent-restarts %d needs --restart-lease, the Lease it limits", o.MaxConcurrentRestarts))
	}
	for _, t := range o.StartupTaints {
		st, err := ParseStartupTaint(t)
		if err != nil {
			return nil, usage(fmt.Errorf("--startup-taint: %w", err))
		}
		s.StartupTaints = append(s.StartupTaints, st)
	}
	if o.ContainerdDropIn != "" {
		data, err := os.ReadFile(o.ContainerdDropIn)
		if err != nil {
			return nil, usage(fmt.Errorf("--containerd-drop-in: %w", err))
		}
		if err := configure.CheckUserDropIn("--containerd-drop-in "+o.ContainerdDropIn, data); err != nil {
			return nil, usage(err)
		}
		s.ContainerdDropIn = data
	}
	return s, nil
}

// customLayout is the custom distribution's runtime layout (nil when no
// platform is custom).
func (o Options) customLayout() (*platform.Layout, error) {
	given := o.ContainerdConfig != "" || o.CRIOConfig != "" || o.RuntimeUnit != ""
	custom := slices.ContainsFunc(o.Platforms, func(p platform.Platform) bool { return p.Distribution().UserLayout() })
	if !custom {
		if given {
			return nil, errors.New("--containerd-config, --crio-config and --runtime-unit are for platforms of the custom distribution")
		}
		return nil, nil
	}
	var l platform.Layout
	var err error
	switch {
	case o.ContainerdConfig != "" && o.CRIOConfig != "":
		return nil, errors.New("--containerd-config and --crio-config: give one, the runtime the node runs")
	case o.ContainerdConfig != "":
		l, err = platform.CustomLayout(platform.Containerd, o.ContainerdConfig, o.RuntimeSocket, o.RuntimeUnit)
	case o.CRIOConfig != "":
		l, err = platform.CustomLayout(platform.CRIO, o.CRIOConfig, o.RuntimeSocket, o.RuntimeUnit)
	default:
		return nil, errors.New("a custom platform needs its runtime's config file (--containerd-config or --crio-config) and unit (--runtime-unit)")
	}
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// knownCheck tells the check IDs --ignore accepts: the catalogue's, and
// those of executable plugins, which only the host knows.
func knownCheck(id string) bool {
	if strings.HasPrefix(id, "plugin.") {
		return true
	}
	return slices.ContainsFunc(catalog.All(), func(c check.Check) bool { return c.ID == id })
}

// Host is what the command opened for the installer.
type Host struct {
	// Root is the host root (--root, live).
	Root hostfs.Root
	// Writable is the same root opened for writing (/host; nil when
	// --root is not a directory).
	Writable *hostfs.Writable
	// Client is the Kubernetes client (the restart Lease's).
	Client dynamic.Interface
	// Discover are the discovery options.
	Discover discover.Options
	// Log receives progress.
	Log *slog.Logger
}

// Config is the installer's configuration on h, without the manifest and
// fetcher (install mode adds them: LoadPinnedManifest). The runtime is
// restarted through systemd's D-Bus API on its private socket under h's root
// and asked over its CRI socket there; its log is read with the host's
// journalctl.
func (s *Settings) Config(h Host) (Config, error) {
	o := s.opt
	if h.Writable == nil {
		return Config{}, usage(fmt.Errorf("--root %s: node-installer writes the host and needs its root directory", h.Root.Path()))
	}
	cfg := Config{
		NodeName:         s.NodeName,
		Root:             h.Root,
		Writable:         h.Writable,
		Platforms:        o.Platforms,
		Install:          s.Target,
		Custom:           s.Custom,
		ConfigVersion:    o.ConfigVersion,
		Parallel:         o.Parallel,
		Discover:         h.Discover,
		Check:            s.Check,
		KataDeployLabels: o.KataDeployLabels,
		StartupTaints:    s.StartupTaints,
		ContainerdDropIn: s.ContainerdDropIn,
		AdvertiseTEEKeys: o.AdvertiseTEEKeys,
		Kata:             o.Kata,
		CustomRuntimes:   o.CustomRuntimes,
		Log:              h.Log,
	}
	cfg.Discover.Log = h.Log
	if s.LeaseName != "" {
		log, lease := h.Log, o.RestartLease
		cfg.RestartLease = &RestartLease{Client: h.Client, Namespace: s.LeaseNamespace, Name: s.LeaseName, Holder: s.NodeName,
			Slots: o.MaxConcurrentRestarts,
			Waiting: func(holder string) {
				log.Info("waiting for another node's runtime restart", "lease", lease, "holder", holder)
			}}
	}
	finder := runtimectl.Finder{
		Units: systemdbus.Systemd{Root: h.Writable.Name(), Socket: o.SystemdSocket},
		Ask: func(l platform.Layout) runtimectl.Ask {
			sock := l.Socket
			if o.RuntimeSocket != "" {
				sock = o.RuntimeSocket
			}
			return cri.Endpoint{Root: h.Writable.Name(), Path: sock}.Ask()
		},
		Snapshotter: func(l platform.Layout) func(context.Context, string) error {
			sock := l.Socket
			if o.RuntimeSocket != "" {
				sock = o.RuntimeSocket
			}
			return func(ctx context.Context, name string) error {
				return cri.Endpoint{Root: h.Writable.Name(), Path: sock}.ProveSnapshotter(ctx, name, 5*time.Second)
			}
		},
		Journal: runtimectl.Journal{Run: runtimectl.OnHost(h.Root, 10*time.Second)}.Log,
		// The host's own containerd loads its configuration before every
		// restart (chrooted into the host root, which is live).
		Config: func(l platform.Layout) *runtimectl.ContainerdConfig {
			return runtimectl.ContainerdConfigFor(h.Root, runtimectl.OnHost(h.Root, time.Minute), l)
		},
	}
	cfg.Runtime = finder.Find
	cfg.ForceRemove = o.ForceRemove
	cfg.Pods = func(ctx context.Context, l platform.Layout, handlers []string) ([]podguard.Pod, error) {
		sock := l.Socket
		if o.RuntimeSocket != "" {
			sock = o.RuntimeSocket
		}
		return cri.Endpoint{Root: h.Writable.Name(), Path: sock}.RunningPods(ctx, handlers, 10*time.Second)
	}
	if o.VerifySandbox {
		cfg.Sandbox = &SandboxCheck{Timeout: o.SandboxTimeout, Socket: func(l platform.Layout) cri.Endpoint {
			if o.RuntimeSocket != "" {
				return cri.Endpoint{Root: h.Writable.Name(), Path: o.RuntimeSocket}
			}
			return cri.Endpoint{Root: h.Writable.Name(), Path: l.Socket}
		}}
	}
	return cfg, nil
}

// LoadPinnedManifest loads the manifest, which must be pinned by digest:
// a URL through the fetcher, a path from the pod's file system, or, when
// the path is missing and a mirror is given, the mirror's sha256/<hex>. A
// manifest served by the mirror is then fetched through it (UseMirror).
func (s *Settings) LoadPinnedManifest(ctx context.Context, f *fetch.Fetcher, mirror string) (*manifest.Manifest, error) {
	m, err := loadPinned(ctx, f, s.Manifest, mirror)
	if err != nil {
		return nil, err
	}
	if mirror != "" {
		UseMirror(m, mirror)
	}
	return m, nil
}

func loadPinned(ctx context.Context, f *fetch.Fetcher, ref, mirror string) (*manifest.Manifest, error) {
	r, err := manifest.ParseRef(ref)
	if err != nil || r.SHA256 == "" {
		return nil, usage(fmt.Errorf("--manifest %s: expected PATH@sha256:<hex> or URL@sha256:<hex> (%v)", ref, err))
	}
	loc := r.Location
	if !r.Remote {
		if _, err := os.Stat(loc); err == nil || mirror == "" {
			m, err := manifest.LoadRef(r)
			if err != nil {
				return nil, usage(err)
			}
			return m, nil
		}
		loc = strings.TrimSuffix(mirror, "/") + "/sha256/" + r.SHA256
	}
	data, err := f.Bytes(ctx, loc, manifest.MaxSize, r.SHA256)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	m, err := manifest.Parse(data, r.String())
	return m, usage(err)
}
