// Package testenv starts a real Kubernetes control plane for integration
// tests: etcd and kube-apiserver (and optionally kube-controller-manager for
// garbage collection, and kube-scheduler and the node lifecycle controller
// for the real nodes of internal/testkit/testnode), built from source by `make
// tools` into the directory KUBEBUILDER_ASSETS names, and run on loopback
// through controller-runtime's envtest. The NodeReport CRD from deploy/ is
// installed before tests run.
//
// Start one control plane per test package from TestMain with Main: it is
// ready in a few seconds but costs ~300 MB. A missing binary is a loud
// failure with a hint, never a skip.
package testenv

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/deploy"
	"berth.dev/berth/internal/testkit"
)

// AssetsEnv is the environment variable naming the directory that holds
// kube-apiserver, etcd, kube-controller-manager and kubectl.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// hint is appended to every error about missing binaries.
const hint = "run `make tools` (builds them into ~/.cache/berth/bin/k8s-<version>, ~12 min cold) and `. .ci/tools.env`, or use `make test`"

// Agent identity used by deploy/base: the namespace and ServiceAccount the
// agent DaemonSet runs as.
const (
	AgentNamespace      = "berth-system"
	AgentServiceAccount = "berth-agent"
)

// Options selects optional parts of the control plane.
type Options struct {
	// ControllerManager also starts kube-controller-manager with the
	// garbage collector, namespace and admission policy status controllers,
	// so ownerReferences cascade, namespaces finish terminating and
	// ValidatingAdmissionPolicies get their type-checking status.
	ControllerManager bool
	// Workloads makes pods of workload controllers run as in a real
	// cluster (implies ControllerManager): kube-controller-manager also
	// runs the DaemonSet and Job controllers, the ServiceAccount
	// controller (each namespace's default ServiceAccount) and the root CA
	// publisher (the kube-root-ca.crt ConfigMap), and the API server's
	// ServiceAccount admission plugin mounts every pod's token, so that a
	// chart's DaemonSets, hook Jobs and their API clients run on a real
	// node.
	Workloads bool
	// Log receives the control plane's output; nil discards it. Set
	// KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true to see it on stdout.
	Log io.Writer
}

// Env is a running control plane.
type Env struct {
	// Admin is a config for a cluster administrator (system:masters).
	Admin *rest.Config
	// Assets is the directory the binaries were found in.
	Assets string
	// Kubeconfig is the path of a kubeconfig file for Admin (for kubectl).
	Kubeconfig string
	// KubeletClientCA is the path of the CA certificate that signs the
	// client certificate the API server presents to kubelets: a kubelet
	// trusting it (authentication.x509.clientCAFile) serves the API
	// server's log and exec requests.
	KubeletClientCA string

	env *envtest.Environment
	tmp string
	kcm *process

	mu      sync.Mutex // guards sched and nodeCtl
	sched   *process   // kube-scheduler, for real nodes
	nodeCtl *process   // kube-controller-manager's node lifecycle controller
}

// Main starts a control plane, stores it in *env, runs the package's tests
// and stops it; it returns the exit code for os.Exit. Use from TestMain:
//
//	var env *testenv.Env
//	func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }
//
// Under -short it starts nothing and leaves *env nil: every test that uses
// env calls Need first, and the package's other tests run.
func Main(m *testing.M, opts Options, env **Env) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	e, err := New(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: stopping: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Need marks a test that uses the control plane Main starts: under -short
// (where Main starts none) it skips the test; see testkit.NeedsTools.
func Need(t testing.TB) {
	t.Helper()
	testkit.NeedsTools(t, "a real kube-apiserver and etcd")
}

// Start starts a control plane for one test and stops it when the test ends.
// Prefer Main to share one per package.
func Start(t testing.TB, opts Options) *Env {
	t.Helper()
	Need(t)
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stopping the control plane: %v", err)
		}
	})
	return e
}

// binaries are the files Assets must contain.
var binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kubectl"}

// Assets returns the binary directory from KUBEBUILDER_ASSETS after checking
// every binary is there.
func Assets() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: the tests need a real kube-apiserver and etcd; %s", AssetsEnv, hint)
	}
	for _, b := range binaries {
		p := filepath.Join(dir, b)
		if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s=%s: %s is missing or not executable; %s", AssetsEnv, dir, b, hint)
		}
	}
	return dir, nil
}

// New starts a control plane; the caller must Stop it.
func New(opts Options) (*Env, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	crd, err := nodeReportCRD()
	if err != nil {
		return nil, err
	}
	// etcd on tmpfs when there is one: the tests do not need durability.
	tmpParent := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		tmpParent = "/dev/shm"
	}
	tmp, err := os.MkdirTemp(tmpParent, "berth-testenv-")
	if err != nil {
		return nil, fmt.Errorf("creating the control plane's directory: %w", err)
	}
	e := &Env{Assets: assets, tmp: tmp}
	if e.KubeletClientCA, err = kubeletClientCert(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	// envtest logs through controller-runtime's logger, which otherwise
	// prints a warning with a stack trace after 30 s.
	crlog.SetLogger(logr.Discard())
	te := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDs:                  []*apiextv1.CustomResourceDefinition{crd},
		ErrorIfCRDPathMissing: true,
		ControlPlane: envtest.ControlPlane{
			Etcd:      &envtest.Etcd{DataDir: filepath.Join(tmp, "etcd")},
			APIServer: &envtest.APIServer{},
		},
	}
	if opts.Log != nil {
		te.ControlPlane.Etcd.Out, te.ControlPlane.Etcd.Err = opts.Log, opts.Log
		te.ControlPlane.APIServer.Out, te.ControlPlane.APIServer.Err = opts.Log, opts.Log
	}
	args := te.ControlPlane.GetAPIServer().Configure()
	// 1.37 on loopback: without these it advertises an address it cannot
	// reach and tries to reconcile the kubernetes Service endpoints.
	args.Set("advertise-address", "127.0.0.1")
	args.Set("bind-address", "127.0.0.1")
	args.Set("endpoint-reconciler-type", "none")
	// Node identity as in a real cluster: the Node authorizer and the
	// NodeRestriction admission plugin. No controller creates default
	// ServiceAccounts, so the ServiceAccount admission plugin stays off.
	args.Set("authorization-mode", "Node", "RBAC")
	if opts.Workloads {
		args.Set("enable-admission-plugins", "NodeRestriction", "ServiceAccount")
		// envtest's default disables it.
		args.Disable("disable-admission-plugins")
	} else {
		args.Set("enable-admission-plugins", "NodeRestriction")
		args.Set("disable-admission-plugins", "ServiceAccount")
	}
	args.Set("kubelet-client-certificate", filepath.Join(tmp, kubeletClientCertFile))
	args.Set("kubelet-client-key", filepath.Join(tmp, kubeletClientKeyFile))
	// A test node's hostname is its unique name, which no DNS resolves:
	// logs and exec go to its address.
	args.Set("kubelet-preferred-address-types", "InternalIP")
	e.env = te

	start := time.Now()
	cfg, err := te.Start()
	if err != nil {
		// envtest leaves the processes running when a later step (CRD
		// installation) fails.
		if stopErr := te.Stop(); stopErr != nil {
			slog.Warn("testenv: stopping after a failed start", "err", stopErr)
		}
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("starting etcd and kube-apiserver from %s: %w", assets, err)
	}
	e.Admin = cfg
	e.Kubeconfig = filepath.Join(tmp, "admin.kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, te.KubeConfig, 0o600); err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	if opts.ControllerManager || opts.Workloads {
		if err := e.startControllerManager(opts.Log, opts.Workloads); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	slog.Debug("testenv: control plane ready", "after", time.Since(start), "url", cfg.Host)
	return e, nil
}

// startControllerManager runs kube-controller-manager with just the
// garbage collector and namespace controllers (and, for workloads, those
// of Options.Workloads) and waits until it serves.
func (e *Env) startControllerManager(log io.Writer, workloads bool) error {
	if log == nil {
		log = io.Discard
	}
	// The garbage collector cascades ownerReferences, the namespace
	// controller finishes deletions, and the admission policy status
	// controller reports CEL type-checking warnings of policies.
	controllers := "garbage-collector-controller,namespace-controller,validatingadmissionpolicy-status-controller"
	args := []string{
		"--kubeconfig=" + e.Kubeconfig,
		"--authentication-kubeconfig=" + e.Kubeconfig,
		"--authorization-kubeconfig=" + e.Kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--concurrent-gc-syncs=5",
	}
	if workloads {
		controllers += ",daemonset-controller,job-controller,serviceaccount-controller,root-ca-certificate-publisher-controller"
		// The publisher copies this CA into every namespace's
		// kube-root-ca.crt, which pods trust as the API server's.
		ca := filepath.Join(e.tmp, "apiserver-ca.crt")
		if err := os.WriteFile(ca, e.Admin.CAData, 0o644); err != nil {
			return fmt.Errorf("writing the API server's CA: %w", err)
		}
		args = append(args, "--root-ca-file="+ca)
	}
	cmd := exec.Command(filepath.Join(e.Assets, "kube-controller-manager"), append(args, "--controllers="+controllers)...)
	cmd.Stdout, cmd.Stderr = log, log
	p, err := startProcess(cmd, "kube-controller-manager")
	if err != nil {
		return err
	}
	e.kcm = p
	return nil
}

// process is a control plane component envtest does not manage.
type process struct {
	cmd  *exec.Cmd
	done chan error
}

// startProcess starts cmd and gives it half a second to fail on its flags.
func startProcess(cmd *exec.Cmd, name string) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	select {
	case err := <-p.done:
		return nil, fmt.Errorf("%s exited at start: %v", name, err)
	case <-time.After(500 * time.Millisecond):
		return p, nil
	}
}

// stop interrupts the process and kills it if it has not exited after 10 s.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Stop stops the control plane and removes its files.
func (e *Env) Stop() error {
	var errs []error
	e.mu.Lock()
	for _, p := range []**process{&e.sched, &e.nodeCtl} {
		if *p != nil {
			(*p).stop()
			*p = nil
		}
	}
	e.mu.Unlock()
	if e.kcm != nil {
		e.kcm.stop()
		e.kcm = nil
	}
	if e.env != nil {
		if err := e.env.Stop(); err != nil {
			errs = append(errs, err)
		}
		e.env = nil
	}
	if e.tmp != "" {
		if err := os.RemoveAll(e.tmp); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Kubectl returns the path of the kubectl built with the control plane.
func (e *Env) Kubectl() string { return filepath.Join(e.Assets, "kubectl") }

// KubectlCmd returns a kubectl command talking to the control plane as the
// administrator.
func (e *Env) KubectlCmd(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, e.Kubectl(), append([]string{"--kubeconfig=" + e.Kubeconfig}, args...)...)
}

// Clientset returns a typed client for cfg, failing the test on error.
func Clientset(t testing.TB, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("creating a client for %s: %v", cfg.Host, err)
	}
	return cs
}

// AsServiceAccount returns a copy of the admin config that impersonates
// ServiceAccount namespace/name holding a token bound to a pod on node, as
// the kubelet-projected token of a DaemonSet pod does: the user info then
// carries the extra authentication.kubernetes.io/node-name, which the
// ValidatingAdmissionPolicy in deploy/base reads. An empty node omits it.
func (e *Env) AsServiceAccount(namespace, name, node string) *rest.Config {
	cfg := rest.CopyConfig(e.Admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":" + name,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	if node != "" {
		cfg.Impersonate.Extra = map[string][]string{v1alpha1.NodeNameExtraKey: {node}}
	}
	return cfg
}

// AsAgent is AsServiceAccount for berth's agent on node.
func (e *Env) AsAgent(node string) *rest.Config {
	return e.AsServiceAccount(AgentNamespace, AgentServiceAccount, node)
}

// nodeReportCRD decodes the CRD the deploy package embeds.
func nodeReportCRD() (*apiextv1.CustomResourceDefinition, error) {
	raw, err := deploy.Base.ReadFile(deploy.CRDFile)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", deploy.CRDFile, err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", deploy.CRDFile, err)
	}
	return &crd, nil
}

// Healthz checks the API server answers /readyz with "ok".
func (e *Env) Healthz(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return fmt.Errorf("creating a client: %w", err)
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("GET /readyz: %w", err)
	}
	if got := string(bytes.TrimSpace(body)); got != "ok" {
		return fmt.Errorf("GET /readyz: %q, want ok", got)
	}
	return nil
}
