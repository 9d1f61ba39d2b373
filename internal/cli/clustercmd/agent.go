package clustercmd

import (
	"berth.dev/berth/internal/cli"
	"berth.dev/berth/internal/host/discover"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"berth.dev/berth/internal/cli/buildinfo"
	"berth.dev/berth/internal/cluster/agent"
	"berth.dev/berth/internal/cluster/serve"
	"berth.dev/berth/platform"
)

// kubeConfig loads the client configuration the way kubectl does: the
// --kubeconfig file, else $KUBECONFIG, else ~/.kube/config, else the
// in-cluster service account (the DaemonSet).
func kubeConfig(path string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the Kubernetes client configuration (--kubeconfig, KUBECONFIG, ~/.kube/config or in-cluster): %w", err)
	}
	cfg.UserAgent = "berth/" + buildinfo.Get().Version
	return cfg, nil
}

// platformList parses repeatable --platform values (space-separated
// lists are accepted too).
func platformList(values []string) ([]platform.Platform, error) {
	var out []platform.Platform
	for _, s := range values {
		for _, one := range strings.Fields(s) {
			p, err := platform.Parse(one)
			if err != nil {
				return nil, cli.UsageErr(fmt.Errorf("--platform: %w", err))
			}
			out = append(out, p)
		}
	}
	return out, nil
}

type agentFlags struct {
	nodeName    string
	kubeconfig  string
	interval    time.Duration
	platforms   []string
	metricsAddr string
	probe       bool
	backoffMax  time.Duration
	// kataDeployLabels also publishes kata-deploy's TEE label.
	kataDeployLabels bool
}

func newAgentCmd(g *cli.Globals) *cobra.Command {
	var fl agentFlags
	cmd := &cobra.Command{
		// The agent stops itself cleanly on SIGTERM (a pod's stop): the
		// CLI waits for it rather than cutting it off after 10 s.
		Annotations: map[string]string{cli.AnnotationOwnSignals: "true"},
		Use:         "agent",
		Short:       "Publish this node's NodeReport and platform labels (run by the DaemonSet)",
		Long: `agent evaluates the node on start, every --interval and on SIGHUP, and
publishes the result with server-side apply (field manager berth-agent):
the NodeReport named after the node (owned by the Node, so it is garbage
collected with it) and node labels berth.dev/platform.<name>=true|false,
berth.dev/tee=snp|tdx|none and berth.dev/kvm=true|false.

Each cycle reads the Node and the NodeReport back and writes only what
differs, so a quiet interval makes two reads and no writes, and a report or
label edited by hand is restored on the next cycle. When the API server is
unreachable it retries with backoff and jitter. SIGTERM stops it cleanly.

In the DaemonSet the host root is mounted read-only at /host: run it with
--root /host --live so that version commands and the KVM and QEMU probes
run in the host's context.`,
		Example: `  berth agent --root /host --live --node-name "$NODE_NAME"
  berth agent --root testdata/hosts/snp-genoa-k3s-ready --node-name n1 --kubeconfig kubeconfig --interval 1m`,
		Args: cli.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runAgent(cmd, g, fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.nodeName, "node-name", "", "the node to report on (default $NODE_NAME)")
	f.StringVar(&fl.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, ~/.kube/config, or in-cluster)")
	f.DurationVar(&fl.interval, "interval", 10*time.Minute, "time between evaluations")
	f.StringArrayVarP(&fl.platforms, "platform", "p", nil, "platform to evaluate and label (repeatable); default: those of the detected distribution, without debug variants")
	f.StringVar(&fl.metricsAddr, "metrics-addr", ":8080", "address serving /healthz, /readyz and /metrics (empty: none)")
	f.BoolVar(&fl.probe, "probe", true, "run live probes that start processes or map device memory (the QEMU probe, the NVIDIA GPUs' CC-mode registers)")
	f.DurationVar(&fl.backoffMax, "backoff-max", 30*time.Second, "longest delay between retries while the API server is unreachable")
	f.BoolVar(&fl.kataDeployLabels, "kata-deploy-labels", false, "also label the node with kata-deploy's TEE label (amd.feature.node.kubernetes.io/snp, intel.feature.node.kubernetes.io/tdx), which its RuntimeClasses select on, where NFD's kata-deploy rules do not run")
	cli.Positive(cmd, "backoff-max")
	return cmd
}

func runAgent(cmd *cobra.Command, g *cli.Globals, fl agentFlags) error {
	if fl.nodeName == "" {
		fl.nodeName = g.Getenv("NODE_NAME")
	}
	if fl.nodeName == "" {
		return cli.UsageErr(errors.New("berth agent needs the node name: --node-name or NODE_NAME (the DaemonSet sets it from spec.nodeName)"))
	}
	if fl.interval < time.Second {
		return cli.UsageErr(fmt.Errorf("--interval %s: expected at least 1s", fl.interval))
	}
	requested, err := platformList(fl.platforms)
	if err != nil {
		return err
	}
	level := slog.LevelInfo
	if g.Verbose() >= 2 {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(g.Stderr(), &slog.HandlerOptions{Level: level}))

	cfg, err := kubeConfig(fl.kubeconfig)
	if err != nil {
		return cli.UsageErr(err)
	}
	m := agent.NewMetrics()
	agent.CountRequests(cfg, func(method string) { m.APIRequests.WithLabelValues(method).Inc() })
	root, cleanup, err := g.OpenRoot()
	defer cleanup()
	if err != nil {
		return err
	}
	dopt := g.DiscoverOptions(fl.probe)
	dopt.Log = log
	// Every interval reads only the kernel log records added since the
	// last one, and binaries' versions only when their files changed.
	dopt.KernelLog = discover.NewKernelLogFollower(root)
	defer dopt.KernelLog.Close()
	dopt.Cache = discover.NewFileCache()
	a, err := agent.New(agent.Config{
		NodeName:         fl.nodeName,
		Version:          buildinfo.Get().Version,
		Evaluate:         agent.Evaluator(root, dopt, requested),
		Interval:         fl.interval,
		BackoffMax:       fl.backoffMax,
		KataDeployLabels: fl.kataDeployLabels,
		Log:              log,
		Metrics:          m,
	}, cfg)
	if err != nil {
		return cli.UsageErr(err)
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	trigger := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				select {
				case trigger <- struct{}{}:
				default:
				}
			}
		}
	}()

	serveErr := make(chan error, 1)
	if fl.metricsAddr != "" {
		go func() {
			serveErr <- flagErr("--metrics-addr", serve.HTTP(ctx, fl.metricsAddr, agent.Handler(a, m), log))
		}()
	}
	log.Info("berth agent starting", "node", fl.nodeName, "root", root.Path(), "live", root.Live(), "interval", fl.interval, "server", cfg.Host)
	runErr := a.Run(ctx, trigger)
	stop()
	if fl.metricsAddr != "" {
		if err := <-serveErr; err != nil && runErr == nil {
			runErr = err
		}
	}
	return runErr
}

// flagErr names the flag whose value err is about; nil stays nil. The
// serving package knows addresses, not the command line they came from.
func flagErr(flag string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", flag, err)
}
