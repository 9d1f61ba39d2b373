package clustercmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/cluster/nodeinstall"
	"berth.dev/berth/internal/cluster/serve"
	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/fetch"
	"berth.dev/berth/internal/node/install"
	"berth.dev/berth/internal/node/runtimectl/systemdbus"
)

type nodeInstallerFlags struct {
	platforms        []string
	manifest         string
	from             []string
	mirror           string
	prefix           string
	suffix           string
	kataConfigDir    string
	containerdConfig string
	crioConfig       string
	runtimeUnit      string
	runtimeSocket    string
	systemdSocket    string
	configVersion    int
	kataDeployLabels bool
	verifySandbox    bool
	sandboxTimeout   time.Duration
	mode             string
	nodeName         string
	kubeconfig       string
	healthAddr       string
	restartLease     string
	startupTaint     string
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
remedy. With --startup-taint, a run that installs every platform with its
handler verified live then removes that taint (the operator registers
nodes with it) from this node, and no other; a failed run keeps it.

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
	f.StringVar(&fl.prefix, "prefix", "", "installation prefix on the host (default "+configure.DefaultPrefix+", "+configure.DefaultPrefix+"-<suffix> with --install-suffix)")
	cli.AddSuffixFlag(cmd, &fl.suffix)
	f.StringVar(&fl.kataConfigDir, "kata-config-dir", "", "directory on the host for the Kata configuration files (default <prefix>/etc/kata)")
	f.StringVar(&fl.containerdConfig, "containerd-config", "", "custom distribution: containerd's main config file on the host")
	f.StringVar(&fl.crioConfig, "crio-config", "", "custom distribution: CRI-O's main config file on the host")
	f.StringVar(&fl.runtimeUnit, "runtime-unit", "", "custom distribution: the runtime's systemd unit")
	f.StringVar(&fl.runtimeSocket, "runtime-socket", "", "the runtime's CRI socket on the host (default: the distribution's)")
	f.StringVar(&fl.systemdSocket, "systemd-socket", "/"+systemdbus.PrivateSocket, "systemd's private D-Bus socket on the host (under --root)")
	f.IntVar(&fl.configVersion, "containerd-config-version", 0, "containerd config version to write when the node's containerd version is unknown")
	f.BoolVar(&fl.verifySandbox, "verify-sandbox", true, "finally prove each live handler by starting, stopping and removing a pod sandbox with it (skipped, with a warning, where discovery finds no usable /dev/kvm); a failed sandbox fails the install like a handler that is not live")
	f.DurationVar(&fl.sandboxTimeout, "sandbox-timeout", 2*time.Minute, "how long the proving sandbox may take to start")
	f.BoolVar(&fl.kataDeployLabels, "kata-deploy-labels", false, "also label the node "+nodeinstall.KataDeployLabel+"=true where a platform is installed")
	f.StringVar(&fl.mode, "mode", "", "install or cleanup (default $"+nodeinstall.ModeEnv+", else install)")
	f.StringVar(&fl.nodeName, "node-name", "", "this node's name (default $NODE_NAME)")
	f.StringVar(&fl.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.StringVar(&fl.healthAddr, "health-addr", ":8081", "address serving /healthz and /readyz (empty: none)")
	f.StringVar(&fl.restartLease, "restart-lease", "", "NAMESPACE/NAME of a coordination.k8s.io Lease held while this node restarts its runtime, so that at most one node of the cluster does at a time (empty: no lock)")
	f.StringVar(&fl.startupTaint, "startup-taint", "", "KEY[=VALUE]:EFFECT of a taint the operator puts on nodes at registration (e.g. berth.dev/runtime-not-ready:NoSchedule), removed from this node once every platform's handler is verified live; a failed install keeps it (empty: none)")
	f.IntVar(&fl.parallel, "parallel", 4, "downloads at once")
	f.StringSliceVar(&fl.ignore, "ignore", nil, "check IDs whose failures become warnings, so that the platform installs anyway (comma-separated, case-insensitive; \"all\" only alone), as berth check --ignore")
	cmd.AddCommand(newTeardownCmd(g))
	return cmd
}

// options are the flags as nodeinstall takes them.
func (fl nodeInstallerFlags) options(g *cli.Globals) (nodeinstall.Options, error) {
	ps, err := platformList(fl.platforms)
	if err != nil {
		return nodeinstall.Options{}, err
	}
	return nodeinstall.Options{
		Mode: fl.mode, NodeName: fl.nodeName, Platforms: ps, Manifest: fl.manifest,
		Prefix: fl.prefix, Suffix: fl.suffix, KataConfigDir: fl.kataConfigDir,
		ContainerdConfig: fl.containerdConfig, CRIOConfig: fl.crioConfig, RuntimeUnit: fl.runtimeUnit, RuntimeSocket: fl.runtimeSocket,
		SystemdSocket: fl.systemdSocket, ConfigVersion: fl.configVersion, KataDeployLabels: fl.kataDeployLabels,
		VerifySandbox: fl.verifySandbox, SandboxTimeout: fl.sandboxTimeout,
		RestartLease: fl.restartLease, StartupTaint: fl.startupTaint, Parallel: fl.parallel, Ignore: fl.ignore, Getenv: g.Getenv,
	}, nil
}

// usage gives nodeinstall's errors in the flags exit 2.
func usage(err error) error {
	if nodeinstall.IsUsage(err) {
		return cli.UsageErr(err)
	}
	return err
}

func runNodeInstaller(cmd *cobra.Command, g *cli.Globals, fl nodeInstallerFlags) error {
	o, err := fl.options(g)
	if err != nil {
		return err
	}
	set, err := o.Check()
	if err != nil {
		return usage(err)
	}
	mode := set.Mode
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
	ncfg, err := set.Config(nodeinstall.Host{Root: root, Dir: g.Root(), Client: dyn, Discover: g.DiscoverOptions(true), Log: log})
	if err != nil {
		return usage(err)
	}
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
		m, err := set.LoadPinnedManifest(ctx, fetcher, fl.mirror)
		if err != nil {
			return usage(err)
		}
		ncfg.Manifest, ncfg.Fetcher = m, fetcher
	}
	in, err := nodeinstall.New(ncfg, dyn)
	if err != nil {
		return cli.UsageErr(err)
	}

	serveErr := make(chan error, 1)
	if fl.healthAddr != "" {
		go func() { serveErr <- flagErr("--health-addr", serve.HTTP(ctx, fl.healthAddr, in.Health(), log)) }()
	}
	log.Info("berth node-installer starting", "node", set.NodeName, "mode", mode, "root", root.Path(), "platforms", fl.platforms, "prefix", set.Prefix, "install-suffix", set.Suffix)
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
		return cli.ExitErr(cli.ExitNotReady, fmt.Errorf("node-installer (%s) on %s: %w", mode, set.NodeName, err))
	}
	log.Info("done; waiting to be stopped", "node", set.NodeName, "mode", mode)
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

func newTeardownCmd(g *cli.Globals) *cobra.Command {
	var namespace, daemonset, agentDaemonset, kubeconfig, suffix string
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
			s, err := cli.ParseSuffixFlag(suffix)
			if err != nil {
				return err
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
			err = nodeinstall.Teardown(cmd.Context(), dyn, nodeinstall.TeardownOptions{Namespace: namespace, DaemonSet: daemonset, AgentDaemonSet: agentDaemonset, Suffix: s, Timeout: timeout, Log: log})
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
	f.StringVar(&suffix, "install-suffix", "", "the release's install suffix: wait for the installed labels of that install only")
	return cmd
}
