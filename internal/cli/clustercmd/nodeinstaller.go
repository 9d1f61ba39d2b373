package clustercmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"

	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/cluster/nodeinstall"
	"berth.dev/berth/internal/cluster/serve"
	"berth.dev/berth/internal/host/errdefs"
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
	maxRestarts      int
	startupTaints    []string
	containerdDropIn string
	advertiseTEEKeys bool
	forceRemove      bool
	runOnce          bool
	parallel         int
	ignore           []string
	kata             cli.KataFlags
	customRuntimes   []string
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
DaemonSet's first rollout restarts one node's runtime at a time
(--max-concurrent-restarts N: N nodes at a time). A platform that is not ready
gets no files, the label berth.dev/installed.<platform>=no and a Node
Event (BerthPlatformNotReady) naming the first failing check and its
remedy. With --startup-taint (repeatable), a run that installs every
platform with its handler verified live then removes those taints (the
operator registers nodes with them) from this node, and no other; a failed
run keeps them. With
--advertise-tee-keys, the node's SEV-SNP ASIDs and TDX guest KeyIDs (from
the boot log) are advertised in its status.capacity as the extended
resources sev-snp.amd.com/esids and tdx.intel.com/keys, for the TEEs of
the platforms installed; a count that is unknown is not, and says why.

In cleanup mode (--mode cleanup, or BERTH_NODE_INSTALLER_MODE=cleanup, set
by the Helm pre-delete hook through node-installer teardown) it removes the
runtime configuration (restart and verify again), everything berth
installed under the prefix, and its labels.

Neither cleanup nor the removal of a platform dropped from --platform
happens while pods run on the handler it would take away: the pods are
listed over CRI (ready sandboxes with that runtime handler), and the run is
refused before anything is removed, with a Node Event
(BerthRemovalBlocked) naming them (namespace/name, up to 10 and a count),
exit 1; the pod restarts and tries again. A runtime that cannot be asked is
refused the same way. --force-remove removes anyway and logs what it
overrode.

Either way it then stays running with /readyz ok on --health-addr, so that a
rollout with maxUnavailable 1 goes one node at a time. With --run-once (job
mode's per-node Jobs, see dispatch) it exits instead: 0 when every platform
was installed with its handler verified live (or, in cleanup, removed), 1
when a platform is not ready or the run failed. A run that changes
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
	f.IntVar(&fl.maxRestarts, "max-concurrent-restarts", 1, "how many nodes may restart their runtime at once under --restart-lease (slots NAME, NAME-1, ... NAME-(N-1); above 1 the Role also needs list on leases)")
	f.StringArrayVar(&fl.startupTaints, "startup-taint", nil, "KEY[=VALUE]:EFFECT of a taint the operator puts on nodes at registration (e.g. berth.dev/runtime-not-ready:NoSchedule), or a bare KEY for that key's taints of any effect, removed from this node once every platform's handler is verified live; a failed install keeps it; repeatable")
	f.StringVar(&fl.containerdDropIn, "containerd-drop-in", "", "file holding a containerd drop-in of the operator's own (TOML; kata-deploy's containerd.userDropIn), written as "+configure.ContainerdUserDropInName+" beside berth's handler drop-in, loaded and checked by the restart like berth's own change, and removed with the last platform (containerd 2.x or a drop-in directory only)")
	f.BoolVar(&fl.advertiseTEEKeys, "advertise-tee-keys", false, "advertise the node's TEE keys as the extended resources sev-snp.amd.com/esids and tdx.intel.com/keys (kata-deploy's names) in its status.capacity, for the TEEs of the installed platforms; without it, those it advertised before are removed")
	f.BoolVar(&fl.forceRemove, "force-remove", false, "remove a platform (cleanup, or one dropped from the list) even while pods run on its handler on this node, or when the runtime cannot say which do; without it such a removal is refused, with an Event naming the pods, and retried when the pod restarts")
	f.BoolVar(&fl.runOnce, "run-once", false, "exit after the run (job mode): 0 when every platform is installed and verified, 1 otherwise; no health server")
	f.IntVar(&fl.parallel, "parallel", 4, "downloads at once")
	f.StringSliceVar(&fl.ignore, "ignore", nil, "check IDs whose failures become warnings, so that the platform installs anyway (comma-separated, case-insensitive; \"all\" only alone), as berth check --ignore")
	fl.kata.Add(cmd)
	f.StringArrayVar(&fl.customRuntimes, "custom-runtime", nil, "NAME=PLATFORM: a custom runtime (kata-deploy's customRuntimes), a handler of its own made from an installed platform and its --kata-drop-in NAME=...; repeatable")
	cli.Positive(cmd, "parallel", "sandbox-timeout")
	cmd.AddCommand(newTeardownCmd(g), newDispatchCmd(g))
	return cmd
}

// options are the flags as nodeinstall takes them.
func (fl nodeInstallerFlags) options(g *cli.Globals) (nodeinstall.Options, error) {
	ps, err := platformList(fl.platforms)
	if err != nil {
		return nodeinstall.Options{}, err
	}
	customs, err := fl.kata.ParseCustomRuntimes(fl.customRuntimes, ps)
	if err != nil {
		return nodeinstall.Options{}, err
	}
	var names []string
	for _, c := range customs {
		names = append(names, c.Name)
	}
	kata, err := fl.kata.PerPlatform(ps, names)
	if err != nil {
		return nodeinstall.Options{}, err
	}
	return nodeinstall.Options{
		Kata: kata, CustomRuntimes: customs,
		Mode: fl.mode, NodeName: fl.nodeName, Platforms: ps, Manifest: fl.manifest,
		Prefix: fl.prefix, Suffix: fl.suffix, KataConfigDir: fl.kataConfigDir,
		ContainerdConfig: fl.containerdConfig, CRIOConfig: fl.crioConfig, RuntimeUnit: fl.runtimeUnit, RuntimeSocket: fl.runtimeSocket,
		SystemdSocket: fl.systemdSocket, ConfigVersion: fl.configVersion, KataDeployLabels: fl.kataDeployLabels,
		VerifySandbox: fl.verifySandbox, SandboxTimeout: fl.sandboxTimeout,
		RestartLease: fl.restartLease, MaxConcurrentRestarts: fl.maxRestarts, StartupTaints: fl.startupTaints, ContainerdDropIn: fl.containerdDropIn, AdvertiseTEEKeys: fl.advertiseTEEKeys, ForceRemove: fl.forceRemove, Parallel: fl.parallel, Ignore: fl.ignore, Getenv: g.Getenv,
	}, nil
}

func runNodeInstaller(cmd *cobra.Command, g *cli.Globals, fl nodeInstallerFlags) error {
	o, err := fl.options(g)
	if err != nil {
		return err
	}
	set, err := o.Check()
	if err != nil {
		return err
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
	w, err := g.Writable()
	if err != nil {
		return err
	}
	ncfg, err := set.Config(nodeinstall.Host{Root: root, Writable: w, Client: dyn, Discover: g.DiscoverOptions(true), Log: log})
	if err != nil {
		return err
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
			return err
		}
		ncfg.Manifest, ncfg.Fetcher = m, fetcher
	}
	in, err := nodeinstall.New(ncfg, dyn)
	if err != nil {
		return cli.UsageErr(err)
	}

	serveErr := make(chan error, 1)
	if fl.healthAddr != "" && !fl.runOnce {
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
		return errdefs.Failed(fmt.Errorf("node-installer (%s) on %s: %w", mode, set.NodeName, err))
	}
	if fl.runOnce {
		stop()
		if bad := notInstalled(rep); len(bad) > 0 {
			return errdefs.Failed(fmt.Errorf("node-installer on %s: not installed: %s", set.NodeName, strings.Join(bad, ", ")))
		}
		log.Info("done", "node", set.NodeName, "mode", mode)
		return nil
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

// dynamicClient is the client of dispatch and teardown: a kubeconfig
// that does not load is a usage error.
func dynamicClient(kubeconfig string) (*dynamic.DynamicClient, error) {
	cfg, err := kubeConfig(kubeconfig)
	if err != nil {
		return nil, cli.UsageErr(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	return dyn, nil
}

// notInstalled names the platforms of an install run that are not
// installed, with their blocking check.
func notInstalled(rep *nodeinstall.Report) []string {
	var out []string
	for _, r := range rep.Platforms {
		if r.Status == nodeinstall.StatusNotReady {
			out = append(out, r.Platform+" ("+r.Blocker+")")
		}
	}
	return out
}

// jobFlags are the flags that make a dispatch: dispatch's own, and
// teardown's in job mode.
type jobFlags struct {
	template     string
	nodeSelector string
	parallelism  int
}

func (j *jobFlags) add(f *pflag.FlagSet) {
	f.StringVar(&j.template, "job-template", "", "file holding the per-node Job (a batch/v1 Job running node-installer --run-once), as the chart mounts it from its ConfigMap")
	f.StringVar(&j.nodeSelector, "node-selector", "", "label selector of the nodes to run on (empty: every node)")
	f.IntVar(&j.parallelism, "parallelism", 1, "per-node Jobs unfinished at once")
}

// options reads the template; every error is a usage error.
func (j *jobFlags) options(namespace string, log *slog.Logger) (*nodeinstall.DispatchOptions, error) {
	if j.parallelism < 1 {
		return nil, cli.UsageErr(fmt.Errorf("--parallelism %d: expected at least 1", j.parallelism))
	}
	if _, err := labels.Parse(j.nodeSelector); err != nil {
		return nil, cli.UsageErr(fmt.Errorf("--node-selector %q: %w", j.nodeSelector, err))
	}
	data, err := os.ReadFile(j.template)
	if err != nil {
		return nil, cli.UsageErr(fmt.Errorf("--job-template: %w", err))
	}
	t, err := nodeinstall.ParseJobTemplate(data, j.template)
	if err != nil {
		return nil, cli.UsageErr(err)
	}
	return &nodeinstall.DispatchOptions{Namespace: namespace, Template: t, NodeSelector: j.nodeSelector, Parallelism: j.parallelism, Log: log}, nil
}

func newDispatchCmd(g *cli.Globals) *cobra.Command {
	var jf jobFlags
	var namespace, mode, kubeconfig string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "dispatch --namespace NS --job-template FILE",
		Short: "Job mode: run the node-installer once on every selected node, as one node-pinned Job each",
		Long: `dispatch lists the nodes --node-selector selects and creates, in --namespace,
one Job per node from --job-template, pinned to its node by required node
affinity, with at most --parallelism unfinished at once, and waits until all
have finished. Each runs node-installer --run-once, so nothing privileged
stays running. A rerun with the same template and mode creates nothing for
a node whose Job is there; a failed Job is run again; Jobs of another
template, mode or node are deleted. --mode cleanup --delete is the uninstall.

Exit status: 0 every node's Job succeeded, 1 a Job failed or the timeout
passed (the nodes are named), 2 usage error.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if namespace == "" {
				return cli.UsageErr(errors.New("--namespace is required"))
			}
			m, err := nodeinstall.ParseMode(mode)
			if err != nil {
				return cli.UsageErr(fmt.Errorf("--mode: %w", err))
			}
			log := slog.New(slog.NewTextHandler(g.Stderr(), nil))
			opt, err := jf.options(namespace, log)
			if err != nil {
				return err
			}
			opt.Mode, opt.Timeout = m, timeout
			opt.Delete, _ = cmd.Flags().GetBool("delete")
			dyn, err := dynamicClient(kubeconfig)
			if err != nil {
				return err
			}
			res, err := nodeinstall.Dispatch(cmd.Context(), dyn, *opt)
			if res != nil {
				b, _ := json.Marshal(res)
				fmt.Fprintf(g.Stdout(), "%s\n", b)
			}
			if err != nil {
				return errdefs.Failed(err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	jf.add(f)
	f.StringVar(&namespace, "namespace", "", "namespace of the Jobs")
	f.StringVar(&mode, "mode", string(nodeinstall.ModeInstall), "install or cleanup")
	f.Bool("delete", false, "delete the Jobs once every one succeeded")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "how long to wait for every node")
	cli.Positive(cmd, "timeout")
	return cmd
}

func newTeardownCmd(g *cli.Globals) *cobra.Command {
	var namespace, daemonset, agentDaemonset, kubeconfig, suffix string
	var timeout time.Duration
	var jf jobFlags
	cmd := &cobra.Command{
		Use:   "teardown --namespace NS --daemonset NAME",
		Short: "Switch the node-installer DaemonSet to cleanup and wait until every node is clean (Helm pre-delete hook)",
		Long: `teardown patches the node-installer DaemonSet's pod template to cleanup
mode (BERTH_NODE_INSTALLER_MODE=cleanup), then waits until no Node carries
a berth.dev/installed.* label set by the node-installer and every pod of
the DaemonSet is ready in cleanup mode. Helm then deletes the DaemonSet. In
job mode (--job-template instead of --daemonset) it runs a cleanup Job on
every selected node, as dispatch does, and deletes the Jobs once all
succeeded.

Exit status: 0 every node is clean, 1 the timeout passed (the nodes and
pods left are named), 2 usage error.`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if namespace == "" || (daemonset == "") == (jf.template == "") {
				return cli.UsageErr(errors.New("--namespace and one of --daemonset and --job-template (job mode) are required"))
			}
			log := slog.New(slog.NewTextHandler(g.Stderr(), nil))
			var jobs *nodeinstall.DispatchOptions
			if jf.template != "" {
				var err error
				if jobs, err = jf.options(namespace, log); err != nil {
					return err
				}
			}
			s, err := cli.ParseSuffixFlag(suffix)
			if err != nil {
				return err
			}
			dyn, err := dynamicClient(kubeconfig)
			if err != nil {
				return err
			}
			err = nodeinstall.Teardown(cmd.Context(), dyn, nodeinstall.TeardownOptions{Namespace: namespace, DaemonSet: daemonset, AgentDaemonSet: agentDaemonset, Jobs: jobs, Suffix: s, Timeout: timeout, Log: log})
			if err != nil {
				return errdefs.Failed(err)
			}
			if jobs != nil {
				fmt.Fprintf(g.Stdout(), "every node is clean: cleanup Jobs succeeded in %s\n", namespace)
				return nil
			}
			fmt.Fprintf(g.Stdout(), "every node is clean: daemonset %s/%s ran cleanup\n", namespace, daemonset)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&namespace, "namespace", "", "namespace of the node-installer DaemonSet")
	f.StringVar(&daemonset, "daemonset", "", "name of the node-installer DaemonSet")
	jf.add(f)
	f.StringVar(&agentDaemonset, "agent-daemonset", "", "name of the agent's DaemonSet in --namespace: once the nodes are clean, delete it and remove the agent's labels from every node")
	f.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for every node")
	f.StringVar(&suffix, "install-suffix", "", "the release's install suffix: wait for the installed labels of that install only")
	cli.Positive(cmd, "timeout")
	return cmd
}
