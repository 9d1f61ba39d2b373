package clustercmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/cluster/agent"
	"berth.dev/berth/internal/cluster/nodeinstall"
	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/internal/node/runtimectl"
	"berth.dev/berth/internal/node/runtimectl/systemdbus"
	"berth.dev/berth/platform"
)

type nodeInstallerFlags struct {
	platforms        []string
	manifest         string
	from             []string
	mirror           string
	prefix           string
	kataConfigDir    string
	containerdConfig string
	crioConfig       string
	runtimeUnit      string
	runtimeSocket    string
	systemdSocket    string
	configVersion    int
	kataDeployLabels bool
	mode             string
	nodeName         string
	kubeconfig       string
	healthAddr       string
	restartLease     string
	parallel         int
	ignore           []string
}

func newNodeInstallerCmd(g *cli.Globals) *cobra.Command {
	var fl nodeInstallerFlags
	cmd := &cobra.Command{
		// It sleeps after its work until the pod is stopped: SIGTERM ends
		// it cleanly.
		Annotations: map[string]string{cli.AnnotationOwnSignals: "true"},
		Use:         "node-installer --platform P --manifest M@sha256:<hex>",
		Short:       "Install the chosen platforms on this node, or clean them up (run by the DaemonSet)",
		Long: `node-installer is run by a DaemonSet with the host's / at /host
(--root /host --live). In install mode (the default) it runs the preflight
of each --platform on the node; each ready platform is installed from the
manifest (pinned by digest) as berth install does, its runtime
configuration applied, the container runtime restarted through systemd's
D-Bus API on the host's private socket (--systemd-socket) and the handler
checked live over CRI, rolling back if a handler is lost; the node is then
labelled berth.dev/installed.<platform>=true. With --restart-lease, the
restart waits for a Lease that one node holds at a time, so that even the
DaemonSet's first rollout restarts one node's runtime at a time. A platform that is not ready
gets no files, the label berth.dev/installed.<platform>=no and a Node
Event (BerthPlatformNotReady) naming the first failing check and its
remedy.

In cleanup mode (--mode cleanup, or BERTH_NODE_INSTALLER_MODE=cleanup, set
by the Helm pre-delete hook through node-installer teardown) it removes the
runtime configuration (restart and verify again), everything berth
installed under the prefix, and its labels.

Either way it then stays running with /readyz ok on --health-addr, so that a
rollout with maxUnavailable 1 goes one node at a time. A run that changes
nothing restarts nothing. A failure exits 1: the pod restarts and the
rollout waits on this node.`,
		Example: `  berth-cluster --root /host --live node-installer -p kubeadm-qemu-snp \
      -m https://mirror.example/kata-3.24.yaml@sha256:0123...`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNodeInstaller(cmd, g, fl) },
	}
	f := cmd.Flags()
	f.StringArrayVarP(&fl.platforms, "platform", "p", nil, "platform to install (repeatable; required in install mode: never guessed)")
	f.StringVarP(&fl.manifest, "manifest", "m", "", "component manifest, pinned: PATH@sha256:<hex> or URL@sha256:<hex>")
	f.StringArrayVar(&fl.from, "from", nil, "directory or bundle .tar (a hostPath or volume) to take files from before the network; repeatable")
	f.StringVar(&fl.mirror, "mirror", "", "in-cluster mirror URL serving files by sha256/<hex> or by name, tried before the manifest's URLs")
	f.StringVar(&fl.prefix, "prefix", configure.DefaultPrefix, "installation prefix on the host")
	f.StringVar(&fl.kataConfigDir, "kata-config-dir", "", "directory on the host for the Kata configuration files (default <prefix>/etc/kata)")
	f.StringVar(&fl.containerdConfig, "containerd-config", "", "custom distribution: containerd's main config file on the host")
	f.StringVar(&fl.crioConfig, "crio-config", "", "custom distribution: CRI-O's main config file on the host")
	f.StringVar(&fl.runtimeUnit, "runtime-unit", "", "custom distribution: the runtime's systemd unit")
	f.StringVar(&fl.runtimeSocket, "runtime-socket", "", "the runtime's CRI socket on the host (default: the distribution's)")
	f.StringVar(&fl.systemdSocket, "systemd-socket", "/"+systemdbus.PrivateSocket, "systemd's private D-Bus socket on the host (under --root)")
	f.IntVar(&fl.configVersion, "containerd-config-version", 0, "containerd config version to write when the node's containerd version is unknown")
	f.BoolVar(&fl.kataDeployLabels, "kata-deploy-labels", false, "also label the node "+nodeinstall.KataDeployLabel+"=true where a platform is installed")
	f.StringVar(&fl.mode, "mode", "", "install or cleanup (default $"+nodeinstall.ModeEnv+", else install)")
	f.StringVar(&fl.nodeName, "node-name", "", "this node's name (default $NODE_NAME)")
	f.StringVar(&fl.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&fl.healthAddr, "health-addr", ":8081", "address serving /healthz and /readyz (empty: none)")
	f.StringVar(&fl.restartLease, "restart-lease", "", "NAMESPACE/NAME of a coordination.k8s.io Lease held while this node restarts its runtime, so that at most one node of the cluster does at a time (empty: no lock)")
	f.IntVar(&fl.parallel, "parallel", 4, "downloads at once")
	f.StringSliceVar(&fl.ignore, "ignore", nil, "check IDs whose failures become warnings, so that the platform installs anyway (comma-separated, case-insensitive; \"all\" only alone), as berth check --ignore")
	cmd.AddCommand(newTeardownCmd(g))
	return cmd
}

// customLayout is the custom distribution's runtime layout from the flags
// (nil when no platform is custom).
func (fl nodeInstallerFlags) customLayout(ps []platform.Platform) (*platform.Layout, error) {
	given := fl.containerdConfig != "" || fl.crioConfig != "" || fl.runtimeUnit != ""
	custom := false
	for _, p := range ps {
		custom = custom || p.Distribution().UserLayout()
	}
	if !custom {
		if given {
			return nil, cli.UsageErr(errors.New("--containerd-config, --crio-config and --runtime-unit are for platforms of the custom distribution"))
		}
		return nil, nil
	}
	var l platform.Layout
	var err error
	switch {
	case fl.containerdConfig != "" && fl.crioConfig != "":
		return nil, cli.UsageErr(errors.New("--containerd-config and --crio-config: give one, the runtime the node runs"))
	case fl.containerdConfig != "":
		l, err = platform.CustomLayout(platform.Containerd, fl.containerdConfig, fl.runtimeSocket, fl.runtimeUnit)
	case fl.crioConfig != "":
		l, err = platform.CustomLayout(platform.CRIO, fl.crioConfig, fl.runtimeSocket, fl.runtimeUnit)
	default:
		return nil, cli.UsageErr(errors.New("a custom platform needs its runtime's config file (--containerd-config or --crio-config) and unit (--runtime-unit)"))
	}
	if err != nil {
		return nil, cli.UsageErr(err)
	}
	return &l, nil
}

// loadPinnedManifest loads --manifest, which must be pinned by digest: a
// URL through the fetcher, a path from the pod's file system, or, when the
// path is missing and a mirror is given, the mirror's sha256/<hex>.
func loadPinnedManifest(ctx context.Context, f *fetch.Fetcher, ref, mirror string) (*manifest.Manifest, error) {
	r, err := manifest.ParseRef(ref)
	if err != nil || r.SHA256 == "" {
		return nil, cli.UsageErr(fmt.Errorf("--manifest %s: expected PATH@sha256:<hex> or URL@sha256:<hex> (%v)", ref, err))
	}
	loc := r.Location
	if !r.Remote {
		if _, err := os.Stat(loc); err == nil || mirror == "" {
			m, err := manifest.LoadRef(r)
			if err != nil {
				return nil, cli.UsageErr(err)
			}
			return m, nil
		}
		loc = strings.TrimSuffix(mirror, "/") + "/sha256/" + r.SHA256
	}
	data, err := f.Bytes(ctx, loc, manifest.MaxSize, r.SHA256)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	return manifest.Parse(data, r.String())
}

func runNodeInstaller(cmd *cobra.Command, g *cli.Globals, fl nodeInstallerFlags) error {
	if fl.mode == "" {
		fl.mode = g.Getenv(nodeinstall.ModeEnv)
	}
	if fl.mode == "" {
		fl.mode = string(nodeinstall.ModeInstall)
	}
	mode, err := nodeinstall.ParseMode(fl.mode)
	if err != nil {
		return cli.UsageErr(err)
	}
	if fl.nodeName == "" {
		fl.nodeName = g.Getenv("NODE_NAME")
	}
	if fl.nodeName == "" {
		return cli.UsageErr(errors.New("node-installer needs the node name: --node-name or NODE_NAME (the DaemonSet sets it from spec.nodeName)"))
	}
	if !filepath.IsAbs(fl.prefix) {
		return cli.UsageErr(fmt.Errorf("--prefix %s: expected an absolute path on the host", fl.prefix))
	}
	if fl.kataConfigDir != "" && !filepath.IsAbs(fl.kataConfigDir) {
		return cli.UsageErr(fmt.Errorf("--kata-config-dir %s: expected an absolute path on the host", fl.kataConfigDir))
	}
	ps, err := platformList(fl.platforms)
	if err != nil {
		return err
	}
	if mode == nodeinstall.ModeInstall && len(ps) == 0 {
		return cli.UsageErr(errors.New("--platform is required: berth never picks a platform for you"))
	}
	if mode == nodeinstall.ModeInstall {
		if fl.manifest == "" {
			return cli.UsageErr(errors.New("--manifest is required: PATH@sha256:<hex> or URL@sha256:<hex>"))
		}
		if r, err := manifest.ParseRef(fl.manifest); err != nil || r.SHA256 == "" {
			if err == nil {
				err = fmt.Errorf("--manifest %s is not pinned: every node must install the same release, so give it as %s@sha256:<hex>", fl.manifest, fl.manifest)
			}
			return cli.UsageErr(err)
		}
	}
	custom, err := fl.customLayout(ps)
	if err != nil {
		return err
	}
	ignore, err := check.ParseIgnore(fl.ignore, knownCheck)
	if err != nil {
		return cli.UsageErr(err)
	}
	if fl.restartLease != "" {
		ns, name, ok := strings.Cut(fl.restartLease, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return cli.UsageErr(fmt.Errorf("--restart-lease %q: expected NAMESPACE/NAME", fl.restartLease))
		}
	}
	level := slog.LevelInfo
	if g.Verbose() >= 2 {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(g.Stderr(), &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	cfg, err := kubeConfig(fl.kubeconfig)
	if err != nil {
		return cli.UsageErr(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	root, cleanup, err := g.OpenRoot()
	defer cleanup()
	if err != nil {
		return err
	}
	hostDir := g.Root()
	if fi, err := os.Stat(hostDir); err != nil || !fi.IsDir() {
		return cli.UsageErr(fmt.Errorf("--root %s: node-installer writes the host and needs its root directory", hostDir))
	}

	ncfg := nodeinstall.Config{
		NodeName:         fl.nodeName,
		Root:             root,
		HostDir:          hostDir,
		Platforms:        ps,
		Prefix:           fl.prefix,
		KataConfigDir:    fl.kataConfigDir,
		Custom:           custom,
		ConfigVersion:    fl.configVersion,
		Parallel:         fl.parallel,
		Discover:         g.DiscoverOptions(true),
		Check:            check.Options{Ignore: ignore},
		KataDeployLabels: fl.kataDeployLabels,
		Log:              log,
	}
	ncfg.Discover.Log = log
	if fl.restartLease != "" {
		ns, name, _ := strings.Cut(fl.restartLease, "/")
		ncfg.RestartLease = &nodeinstall.RestartLease{Client: dyn, Namespace: ns, Name: name, Holder: fl.nodeName,
			Waiting: func(h string) {
				log.Info("waiting for another node's runtime restart", "lease", fl.restartLease, "holder", h)
			}}
	}
	onHost := func(p string) string { return filepath.Join(hostDir, filepath.FromSlash(strings.TrimPrefix(p, "/"))) }
	finder := runtimectl.Finder{
		Units: systemdbus.Systemd{Socket: onHost(fl.systemdSocket)},
		Ask: func(l platform.Layout) runtimectl.Ask {
			s := l.Socket
			if fl.runtimeSocket != "" {
				s = fl.runtimeSocket
			}
			return cri.Ask(onHost(s))
		},
		Journal: runtimectl.Journal{Run: runtimectl.OnHost(root, 10*time.Second)}.Log,
	}
	ncfg.Runtime = finder.Find
	if mode == nodeinstall.ModeInstall {
		ls, _, err := install.Locators(fl.from)
		if err != nil {
			return cli.UsageErr(err)
		}
		// No download cache: a cache on the host would outlive the
		// cleanup, which must leave the node as it found it.
		fetcher := fetch.New(ls, "")
		fetcher.Log = log
		defer fetcher.Close()
		m, err := loadPinnedManifest(ctx, fetcher, fl.manifest, fl.mirror)
		if err != nil {
			return err
		}
		if fl.mirror != "" {
			nodeinstall.UseMirror(m, fl.mirror)
		}
		ncfg.Manifest, ncfg.Fetcher = m, fetcher
	}
	in, err := nodeinstall.New(ncfg, dyn)
	if err != nil {
		return cli.UsageErr(err)
	}

	serveErr := make(chan error, 1)
	if fl.healthAddr != "" {
		go func() { serveErr <- agent.Serve(ctx, fl.healthAddr, in.Health(), log) }()
	}
	log.Info("berth node-installer starting", "node", fl.nodeName, "mode", mode, "root", root.Path(), "platforms", fl.platforms, "prefix", fl.prefix)
	// The run is not cut short by SIGTERM: a restart of the runtime
	// interrupted half-way would leave its rollback without a context to
	// restart with. The pod's grace period bounds the wait; a SIGKILL
	// after it is what the install's crash safety is built for.
	rep, err := in.Run(context.WithoutCancel(ctx), mode)
	if rep != nil {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(g.Stdout(), "%s\n", b)
	}
	if err != nil {
		stop()
		return cli.ExitErr(cli.ExitNotReady, fmt.Errorf("node-installer (%s) on %s: %w", mode, fl.nodeName, err))
	}
	log.Info("done; waiting to be stopped", "node", fl.nodeName, "mode", mode)
	// Stay running: a DaemonSet's pod that exits is restarted, and the
	// readiness of this one is what paces the rollout.
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		if err != nil {
			return err
		}
		<-ctx.Done()
	}
	stop()
	if fl.healthAddr != "" {
		return <-serveErr
	}
	return nil
}

// knownCheck tells the check IDs --ignore accepts: the catalogue's, and
// those of executable plugins, which only the host knows.
func knownCheck(id string) bool {
	if strings.HasPrefix(id, "plugin.") {
		return true
	}
	return slices.ContainsFunc(catalog.All(), func(c check.Check) bool { return c.ID == id })
}

func newTeardownCmd(g *cli.Globals) *cobra.Command {
	var namespace, daemonset, agentDaemonset, kubeconfig string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "teardown --namespace NS --daemonset NAME",
		Short: "Switch the node-installer DaemonSet to cleanup and wait until every node is clean (Helm pre-delete hook)",
		Long: `teardown patches the node-installer DaemonSet's pod template to cleanup
mode (BERTH_NODE_INSTALLER_MODE=cleanup), then waits until no Node carries
a berth.dev/installed.* label set by the node-installer and every pod of
the DaemonSet is ready in cleanup mode. Helm then deletes the DaemonSet.

Exit status: 0 every node is clean, 1 the timeout passed (the nodes and
pods left are named), 2 usage error.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if namespace == "" || daemonset == "" {
				return cli.UsageErr(errors.New("--namespace and --daemonset are required"))
			}
			cfg, err := kubeConfig(kubeconfig)
			if err != nil {
				return cli.UsageErr(err)
			}
			dyn, err := dynamic.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("creating the Kubernetes client: %w", err)
			}
			log := slog.New(slog.NewTextHandler(g.Stderr(), nil))
			err = nodeinstall.Teardown(cmd.Context(), dyn, nodeinstall.TeardownOptions{Namespace: namespace, DaemonSet: daemonset, AgentDaemonSet: agentDaemonset, Timeout: timeout, Log: log})
			if err != nil {
				return cli.ExitErr(cli.ExitNotReady, err)
			}
			fmt.Fprintf(g.Stdout(), "every node is clean: daemonset %s/%s ran cleanup\n", namespace, daemonset)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&namespace, "namespace", "", "namespace of the node-installer DaemonSet")
	f.StringVar(&daemonset, "daemonset", "", "name of the node-installer DaemonSet")
	f.StringVar(&agentDaemonset, "agent-daemonset", "", "name of the agent's DaemonSet in --namespace: once the nodes are clean, delete it and remove the agent's labels from every node")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for every node")
	return cmd
}
