package clustercmd

import (
	"berth.dev/berth/internal/cli"
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/agent"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testenv"
)

// writeKubeconfig writes cfg (client certificates and impersonation) as a
// kubeconfig file, the way a DaemonSet pod's agent would see its identity.
func writeKubeconfig(t *testing.T, path string, cfg *rest.Config) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups, ImpersonateUserExtra: cfg.Impersonate.Extra,
	}
	kc.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "x"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
}

// agentProc is a running `berth agent`.
type agentProc struct {
	node string
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  strings.Builder
	done chan error
}

func (p *agentProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *agentProc) waitLog(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(p.logText()); m != nil {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: no %q in the agent's log after %s:\n%s", p.node, re, within, p.logText())
	return nil
}

func startAgent(t *testing.T, bin, root, node, kubeconfig string) *agentProc {
	t.Helper()
	p := &agentProc{node: node, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, "agent", "--root", root, "--node-name", node, "--kubeconfig", kubeconfig,
		"--interval", "2s", "--metrics-addr", "127.0.0.1:0", "--probe=false")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
		}
	})
	return p
}

// TestClusterEndToEnd deploys the manifests to a real API server, runs
// `berth agent` processes for fixture nodes under the agent's identity
// (ServiceAccount with a node-bound token, confined by the admission
// policy), and checks `berth fleet`: the matrix, the outlier, --require,
// JSON and HTML; then the agents' health and metrics endpoints, SIGHUP and
// a clean SIGTERM.
func TestClusterEndToEnd(t *testing.T) {
	env := testenv.Start(t, testenv.Options{})
	ctx := context.Background()
	dir := t.TempDir()

	if out, err := env.KubectlCmd(ctx, "apply", "--server-side", "-k", filepath.Join("..", "..", "..", "deploy", "base")).CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k deploy/base: %v\n%s", err, out)
	}
	bin := filepath.Join(dir, "berth")
	if out, err := exec.Command("go", "build", "-o", bin, "../../../cmd/berth-cluster").CombinedOutput(); err != nil {
		t.Fatalf("building berth: %v\n%s", err, out)
	}

	// A Genoa node with another kernel: the fleet's outlier.
	odd := filepath.Join(dir, "genoa-odd")
	if out, err := exec.Command("cp", "-a", filepath.Join("..", "..", "..", "testdata", "hosts", "snp-genoa-k3s-ready"), odd).CombinedOutput(); err != nil {
		t.Fatalf("copying the fixture: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(odd, "proc", "sys", "kernel", "osrelease"), []byte("6.8.0-40-generic\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join("..", "..", "..", "testdata", "hosts")
	nodes := map[string]string{
		"genoa-1": filepath.Join(hosts, "snp-genoa-k3s-ready"),
		"genoa-2": filepath.Join(hosts, "snp-genoa-k3s-ready"),
		"genoa-3": filepath.Join(hosts, "snp-genoa-k3s-ready"),
		"genoa-4": odd,
		"tdx-1":   filepath.Join(hosts, "tdx-emr-kubeadm-ready"),
		"milan-1": filepath.Join(hosts, "snp-milan-bios-off"),
	}
	cs := testenv.Clientset(t, env.Admin)
	for n := range nodes {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The admission policy confines an agent to its own node: wait until
	// the API server enforces it (policies load asynchronously).
	t.Run("admission policy confines the agent", func(t *testing.T) {
		root, err := hostfs.OpenDir(nodes["tdx-1"])
		if err != nil {
			t.Fatal(err)
		}
		a, err := agent.New(agent.Config{NodeName: "tdx-1", Evaluate: agent.Evaluator(root, discover.Options{}, nil)}, env.AsAgent("genoa-1"))
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			err := a.Cycle(ctx)
			if err != nil && strings.Contains(err.Error(), "may only write") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("an agent on genoa-1 publishing for tdx-1: %v; want the admission policy to refuse", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	procs := map[string]*agentProc{}
	for n, root := range nodes {
		kc := filepath.Join(dir, n+".kubeconfig")
		writeKubeconfig(t, kc, env.AsAgent(n))
		procs[n] = startAgent(t, bin, root, n, kc)
	}
	dyn, err := dynamic.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		l, err := dyn.Resource(v1alpha1.GroupVersionResource).List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == len(nodes) {
			break
		}
		if time.Now().After(deadline) {
			for n, p := range procs {
				t.Logf("%s:\n%s", n, p.logText())
			}
			t.Fatalf("NodeReports after 60 s: %v, %v", err, l)
		}
		time.Sleep(200 * time.Millisecond)
	}

	t.Run("fleet matrix and outliers", func(t *testing.T) {
		code, out, errOut := runCLI(t, "fleet", "--kubeconfig", env.Kubeconfig, "--page-size", "2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		for _, want := range []string{
			"6 nodes in ",
			"amd genoa             genoa-1, genoa-2, genoa-3",
			"genoa-4 [amd genoa]: kernel.release is 6.8.0-40-generic; 3 of 4 nodes have 6.14.0-29-generic",
			"k3s-qemu-snp-genoa ",
			"kubeadm-qemu-tdx ",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("fleet output lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "Malformed") {
			t.Errorf("malformed reports:\n%s", out)
		}
	})
	t.Run("fleet --require", func(t *testing.T) {
		if code, _, errOut := runCLI(t, "fleet", "--kubeconfig", env.Kubeconfig, "--require", "k3s-qemu-snp-genoa", "-o", "json"); code != 0 {
			t.Errorf("--require k3s-qemu-snp-genoa: exit %d: %s", code, errOut)
		}
		code, _, errOut := runCLI(t, "fleet", "--kubeconfig", env.Kubeconfig, "--require", "kubeadm-qemu-snp-milan", "-o", "json")
		if code != cli.ExitNotReady || !strings.Contains(errOut, "no node is ready for kubeadm-qemu-snp-milan") {
			t.Errorf("--require kubeadm-qemu-snp-milan: exit %d, %s; want 1", code, errOut)
		}
	})
	t.Run("fleet -o json and --html", func(t *testing.T) {
		page := filepath.Join(dir, "fleet.html")
		code, out, errOut := runCLI(t, "fleet", "--kubeconfig", env.Kubeconfig, "-o", "json", "--html", page)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var a struct {
			Nodes     int
			Outliers  []struct{ Node, Fact string }
			Malformed []any
		}
		if err := json.Unmarshal([]byte(out), &a); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range a.Outliers {
			found = found || (o.Node == "genoa-4" && o.Fact == "kernel.release")
		}
		if a.Nodes != 6 || len(a.Malformed) != 0 || !found {
			t.Errorf("%+v", a)
		}
		b, err := os.ReadFile(page)
		if err != nil || !strings.Contains(string(b), "genoa-4") {
			t.Errorf("HTML page: %v", err)
		}
	})

	t.Run(fmt.Sprintf("fleet over %d reports", *fleetReports), func(t *testing.T) {
		fleetScale(t, bin, env.Kubeconfig, dyn, *fleetReports)
	})

	t.Run("health, metrics, SIGHUP and SIGTERM", func(t *testing.T) {
		p := procs["tdx-1"]
		addr := p.waitLog(t, regexp.MustCompile(`serving health endpoints" addr=(\S+)`), 10*time.Second)[1]
		get := func(path string) (int, string) {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		if code, _ := get("/healthz"); code != 200 {
			t.Errorf("/healthz: %d", code)
		}
		if code, body := get("/readyz"); code != 200 {
			t.Errorf("/readyz: %d %s", code, body)
		}
		_, metrics := get("/metrics")
		for _, m := range []string{"berth_agent_check_duration_seconds_count", "berth_agent_platforms{verdict=\"ready\"}",
			"berth_agent_publishes_total{object=\"report\"} 1", "berth_agent_publish_errors_total 0", "berth_agent_api_requests_total{method=\"GET\"}"} {
			if !strings.Contains(metrics, m) {
				t.Errorf("/metrics lacks %s", m)
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		p.waitLog(t, regexp.MustCompile(`re-evaluating on request`), 5*time.Second)
		for n, p := range procs {
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-p.done:
				if err != nil {
					t.Errorf("%s: exit after SIGTERM: %v\n%s", n, err, p.logText())
				}
			case <-time.After(10 * time.Second):
				t.Errorf("%s: still running 10 s after SIGTERM", n)
			}
			if strings.Contains(p.logText(), "level=ERROR") {
				t.Errorf("%s logged errors:\n%s", n, p.logText())
			}
		}
		// Quiet intervals write nothing: one report and one label write
		// per agent however many 2 s intervals passed.
		if !strings.Contains(metrics, fmt.Sprintf("berth_agent_publishes_total{object=%q} 1", "labels")) {
			t.Errorf("labels were written more than once:\n%s", metrics)
		}
	})
}
