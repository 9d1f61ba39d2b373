// Package testnode runs a real single Kubernetes node for tests, joined to
// the control plane of internal/testkit/testenv: a real kubelet (built with the
// API server by .ci/k8s.sh), containerd 2.x (BERTH_CONTAINERD2, built by
// .ci/tools.sh) with runc and the CNI bridge, loopback and host-local
// plugins from Debian, and kube-scheduler on the control plane.
//
// containerd and the kubelet run on the machine's real root, not in a
// private mount namespace, so that a pod's hostPath volumes show the
// host's real files, as they do for berth's agent and node-installer on a
// real node. Everything else a node owns lives under its own temporary
// directory and cgroup root and is removed by Stop, which also puts back
// what the programs change machine-wide (see host.go). Nodes have unique
// names, paths, bridges, subnets and ports, so tests of several packages
// may run nodes at the same time.
//
// It needs root. A missing binary is a loud failure with a hint, never a
// skip.
package testnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/testenv"
)

// Environment variables naming the containerd 2.x binary the node runs
// and the containerd-shim-runc-v2 built from the same release (by
// .ci/k8s.sh).
const (
	ContainerdEnv = "BERTH_CONTAINERD2"
	ShimEnv       = "BERTH_CONTAINERD2_SHIM"
)

// hint is appended to errors about missing tools.
const hint = "run `make tools` (.ci/tools.sh installs runc, containernetworking-plugins and iproute2 and builds containerd; .ci/k8s.sh builds the kubelet and containerd's runc shim) and `. .ci/tools.env`, or use `make test`"

// Options configure a node.
type Options struct {
	// Name is the Node's name; empty means a unique "berth-node-<hex>".
	Name string
	// Containerd is the containerd binary; empty means $BERTH_CONTAINERD2.
	Containerd string
	// Shim is its containerd-shim-runc-v2; empty means
	// $BERTH_CONTAINERD2_SHIM.
	Shim string
	// ReadyTimeout bounds the wait for the Node to be Ready (default 2 min).
	ReadyTimeout time.Duration
	// Log also receives the kubelet's, kube-scheduler's and the node
	// lifecycle controller's output (they are
	// always kept for failure messages); nil keeps them only there.
	Log io.Writer
}

// Node is a running node.
type Node struct {
	// Name is the Node object's name and the kubelet's hostname
	// (label kubernetes.io/hostname).
	Name string
	// Dir holds everything of the node that can live outside the machine's
	// fixed paths: containerd's root, state and config, the kubelet's root
	// directory, pod logs, the CNI config and address leases.
	Dir string
	// ContainerdConfig is containerd's config file: a test may rewrite it
	// (berth's runtime configuration) and RestartContainerd.
	ContainerdConfig string
	// ContainerdSocket is containerd's gRPC (and CRI) socket.
	ContainerdSocket string
	// Containerd supervises the containerd daemon.
	Containerd *Supervisor
	// Kubelet supervises the kubelet.
	Kubelet *Supervisor
	// KubeletConfig is the KubeletConfiguration file; KubeletRootDir its
	// --root-dir.
	KubeletConfig, KubeletRootDir string
	// CgroupRoot is the kubelet's cgroupRoot (cgroupfs syntax), under
	// which all pod cgroups are made.
	CgroupRoot string
	// Bridge and Subnet are the CNI bridge and the pods' addresses;
	// Gateway is the bridge's address, the host as the pods reach it.
	Bridge, Subnet, Gateway string
	// ReadyAfter is how long Start took until the Node was Ready.
	ReadyAfter time.Duration

	env      *testenv.Env
	cs       *kubernetes.Clientset
	ctr      string
	stopOnce sync.Once
	stopErr  error
}

// tools are the binaries a node needs besides containerd and the kubelet.
type tools struct{ kubelet, runc, ctr string }

func findTools(env *testenv.Env) (tools, error) {
	var tl tools
	tl.kubelet = filepath.Join(env.Assets, "kubelet")
	if fi, err := os.Stat(tl.kubelet); err != nil || fi.Mode()&0o111 == 0 {
		return tl, fmt.Errorf("%s is missing or not executable; %s", tl.kubelet, hint)
	}
	var err error
	if tl.runc, err = exec.LookPath("runc"); err != nil {
		return tl, fmt.Errorf("runc: %w; %s", err, hint)
	}
	// Debian's containerd package (1.6) ships ctr; its image import
	// speaks the v1 API containerd 2.x still serves.
	if tl.ctr, err = exec.LookPath("ctr"); err != nil {
		return tl, fmt.Errorf("ctr: %w; %s", err, hint)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return tl, fmt.Errorf("ip (iproute2): %w; %s", err, hint)
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(CNIBinDir, p)); err != nil {
			return tl, fmt.Errorf("CNI plugin %s: %w; %s", p, err, hint)
		}
	}
	return tl, nil
}

// Start starts a node joined to env's control plane (starting
// kube-scheduler and the node lifecycle controller there if they do not
// run: testenv.Env.StartNodeComponents), imports the pause image,
// waits until the Node is Ready and registers Stop at the test's cleanup,
// which fails the test if anything is left on the machine.
func Start(t testing.TB, env *testenv.Env, opts Options) *Node {
	t.Helper()
	testkit.NeedsTools(t, "a real node (kubelet, containerd, runc, CNI), as root")
	if os.Geteuid() != 0 {
		t.Fatal("testnode runs a kubelet and containerd and must run as root")
	}
	bin := opts.Containerd
	if bin == "" {
		if bin = os.Getenv(ContainerdEnv); bin == "" {
			t.Fatalf("%s is not set; %s", ContainerdEnv, hint)
		}
	}
	shim := opts.Shim
	if shim == "" {
		if shim = os.Getenv(ShimEnv); shim == "" {
			t.Fatalf("%s is not set; %s", ShimEnv, hint)
		}
	}
	for _, b := range []string{bin, shim} {
		if fi, err := os.Stat(b); err != nil || fi.IsDir() {
			t.Fatalf("%s: not a binary (%v); %s", b, err, hint)
		}
	}
	tl, err := findTools(env)
	if err != nil {
		t.Fatal(err)
	}
	name := opts.Name
	if name == "" {
		name = "berth-node-" + randHex(4)
	}
	// A short path: unix socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "bn")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{
		Name:             name,
		Dir:              dir,
		ContainerdConfig: filepath.Join(dir, "containerd.toml"),
		ContainerdSocket: filepath.Join(dir, "c.sock"),
		KubeletConfig:    filepath.Join(dir, "kubelet.json"),
		KubeletRootDir:   filepath.Join(dir, "kubelet"),
		CgroupRoot:       "/" + name,
		Bridge:           "bn" + randHex(4),
		env:              env,
		ctr:              tl.ctr,
	}
	if err := claimMachine(name); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("stopping node %s: %v", n.Name, err)
		}
	})
	if n.cs, err = kubernetes.NewForConfig(env.Admin); err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	pause := buildImage(t, dir, "./internal/testkit/testnode/pause", "pause", PauseImage)
	if err := createCgroupRoot(n.CgroupRoot); err != nil {
		t.Fatal(err)
	}
	if err := n.writeCNI(); err != nil {
		t.Fatal(err)
	}
	n.startContainerd(t, bin, containerdConfig(filepath.Join(dir, "containerd"), n.ContainerdSocket, shim, tl.runc, !canLowerOOMScore()), pause)
	if err := env.StartNodeComponents(opts.Log); err != nil {
		t.Fatal(err)
	}
	if err := n.startKubelet(tl.kubelet, opts.Log); err != nil {
		t.Fatal(err)
	}
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	if err := n.waitReady(timeout); err != nil {
		t.Fatalf("node %s: %v\n--- kubelet log (tail):\n%s\n--- containerd log (tail):\n%s",
			n.Name, err, tail(n.Kubelet.Log(), 60), tail(n.Containerd.Log(), 30))
	}
	n.ReadyAfter = time.Since(start)
	t.Logf("node %s Ready after %s (kubelet %s, containerd %s)", n.Name, n.ReadyAfter.Round(time.Millisecond), env.Assets, bin)
	return n
}

// writeCNI picks a /24 no interface of the machine is in and writes the
// bridge network for it.
func (n *Node) writeCNI() error {
	taken := map[string]bool{}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				ip := ipn.IP.To4()
				taken[fmt.Sprintf("%d.%d", ip[1], ip[2])] = ip[0] == 10
			}
		}
	}
	b := make([]byte, 2)
	for {
		_, _ = rand.Read(b)
		// 10.200.0.0/13: clear of the usual pod and service ranges.
		key := fmt.Sprintf("%d.%d", 200+int(b[0]%8), b[1])
		if !taken[key] {
			n.Subnet = "10." + key + ".0/24"
			n.Gateway = "10." + key + ".1"
			break
		}
	}
	conf, err := cniConfig(n.Name, n.Bridge, n.Subnet, filepath.Join(n.Dir, "cni"))
	if err != nil {
		return err
	}
	confDir := filepath.Join(n.Dir, "containerd", "cni", "net.d")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(confDir, "10-berth-testnode.conflist"), conf, 0o644)
}

// criReady is containerd's readiness: its CRI service answers.
func (n *Node) criReady(ctx context.Context) error {
	_, err := cri.Query(ctx, n.ContainerdSocket, 2*time.Second)
	return err
}

func (n *Node) startKubelet(bin string, log io.Writer) error {
	kubeconfig := filepath.Join(n.Dir, "kubelet.kubeconfig")
	if err := n.env.WriteUserKubeconfig(kubeconfig, "system:node:"+n.Name, "system:nodes"); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	conf, err := kubeletConfig(kubeletParams{
		Socket:     n.ContainerdSocket,
		RootDir:    n.KubeletRootDir,
		PodLogsDir: filepath.Join(n.Dir, "pod-logs"),
		CgroupRoot: n.CgroupRoot,
		ClientCA:   n.env.KubeletClientCA,
		Port:       port,
		CgroupV1:   !cgroup2Unified(),
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.KubeletConfig, conf, 0o644); err != nil {
		return err
	}
	argv := []string{bin,
		"--config=" + n.KubeletConfig,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + n.KubeletRootDir,
		"--cert-dir=" + filepath.Join(n.Dir, "kubelet-pki"),
		"--hostname-override=" + n.Name,
		"--v=2",
	}
	n.Kubelet = NewSupervisor("kubelet", argv, func(context.Context) error { return nil })
	if log != nil {
		n.Kubelet.log.tee = log
	}
	return n.Kubelet.Start(context.Background())
}

// waitReady polls the Node until its Ready condition is True and the
// not-ready taint is gone.
func (n *Node) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	last := "not registered"
	for {
		node, err := n.cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil {
			last = "no Ready condition"
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					last = fmt.Sprintf("Ready=%s: %s: %s", c.Status, c.Reason, c.Message)
					if c.Status == corev1.ConditionTrue {
						last = ""
					}
				}
			}
			// Schedulable too: the node lifecycle controller has lifted
			// the taint the API server put on the new Node.
			for _, tn := range node.Spec.Taints {
				if last == "" && tn.Key == corev1.TaintNodeNotReady {
					last = "Ready, but still tainted " + tn.ToString()
				}
			}
			if last == "" {
				return nil
			}
		} else if !apierrors.IsNotFound(err) {
			last = err.Error()
		}
		if !n.Kubelet.Active() {
			return fmt.Errorf("kubelet exited (%v) before the node was Ready (%s)", n.Kubelet.LastExit(), last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not Ready after %s: %s", timeout, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// RestartContainerd restarts the node's containerd (re-reading
// ContainerdConfig) and waits until its CRI service answers again; the
// pods keep running, as with a service manager's restart.
func (n *Node) RestartContainerd(ctx context.Context) error {
	if err := n.Containerd.Restart(ctx); err != nil {
		return fmt.Errorf("node %s: %w\n%s", n.Name, err, tail(n.Containerd.Log(), 40))
	}
	return nil
}

// Stop tears the node down and puts the machine back: the kubelet is
// stopped, every pod sandbox is stopped and removed through CRI (the
// containers killed, their network torn down), containerd is stopped,
// anything still running of the node is killed, what is mounted under
// Dir is unmounted, the cgroups under CgroupRoot, the bridge, the
// container log links and Dir are removed, the machine-wide paths and
// kernel tunables are restored once no node runs (host.go), and the Node
// and its pods are deleted from the API. It returns everything that went
// wrong, including what it had to clean up by force (a sign of a leak).
// Safe to call more than once.
func (n *Node) Stop() error {
	n.stopOnce.Do(func() { n.stopErr = n.stop() })
	return n.stopErr
}

func (n *Node) stop() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if n.Kubelet != nil {
		add(n.Kubelet.Close())
	}
	if n.Containerd != nil {
		if n.Containerd.Active() {
			add(n.removeSandboxes())
		}
		add(n.Containerd.Close())
	}
	// Leaks: what survived is killed, and reported.
	var pids []int
	if n.CgroupRoot != "" {
		p, err := cgroupProcs(n.CgroupRoot)
		add(err)
		pids = append(pids, p...)
	}
	pids = append(pids, processesMentioning(n.Dir+"/")...)
	if len(pids) > 0 {
		add(fmt.Errorf("processes of the node still running after containerd stopped (killed): %v", pids))
		add(killAndWait(pids))
	}
	unmounted, err := unmountAll(n.Dir)
	add(err)
	// The kubelet bind-mounts its root directory onto itself to make it
	// rshared (MakeRShared) and never undoes it: that one is expected.
	forced := slices.DeleteFunc(unmounted, func(mp string) bool { return mp == n.KubeletRootDir })
	if len(forced) > 0 {
		add(fmt.Errorf("mounts left under %s after its pods were removed (unmounted): %s", n.Dir, strings.Join(forced, ", ")))
	}
	if n.CgroupRoot != "" {
		add(removeCgroups(n.CgroupRoot))
	}
	if n.Bridge != "" {
		add(deleteLink(n.Bridge))
	}
	add(n.removeLogLinks())
	add(n.removeCNIResults())
	add(n.deleteFromAPI())
	add(os.RemoveAll(n.Dir))
	add(releaseMachine(n.Name))
	return errors.Join(errs...)
}

// Sandboxes lists the pod sandboxes the node's containerd has (with
// label set, only those carrying that label key), as "ID NAME STATE", so
// that a test can prove that nothing was left behind.
func (n *Node) Sandboxes(t testing.TB, label string) []string {
	t.Helper()
	rs := n.runtimeService(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sb := range list.Items {
		if _, ok := sb.Labels[label]; label == "" || ok {
			out = append(out, sb.Id+" "+sb.Metadata.GetName()+" "+sb.State.String())
		}
	}
	return out
}

// runtimeService is a CRI client of the node's containerd, closed at the
// test's end.
func (n *Node) runtimeService(t testing.TB) runtimeapi.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+n.ContainerdSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtimeapi.NewRuntimeServiceClient(conn)
}

// RunPod starts a pod sandbox with handler over CRI as the kubelet
// starts a pod's (metadata namespace/name, a uid), and returns its id: a
// pod that runs on the handler, for the tests of what must not disturb
// it. Stop removes it with everything else.
func (n *Node) RunPod(t testing.TB, handler, namespace, name string) string {
	t.Helper()
	rs := n.runtimeService(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	uid := randHex(8)
	resp, err := rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{RuntimeHandler: handler,
		Config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
			Hostname: name,
			Labels:   map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace, "io.kubernetes.pod.uid": uid},
			Linux:    &runtimeapi.LinuxPodSandboxConfig{},
		}})
	if err != nil {
		t.Fatalf("starting pod %s/%s with handler %s: %v", namespace, name, handler, err)
	}
	return resp.PodSandboxId
}

// PodState is the state of sandbox id over CRI ("" when it is gone).
func (n *Node) PodState(t testing.TB, id string) string {
	t.Helper()
	rs := n.runtimeService(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		return ""
	}
	return st.GetStatus().GetState().String()
}

// removeSandboxes stops and removes every pod sandbox through CRI, as the
// kubelet would for deleted pods: containerd kills the containers,
// unmounts their root file systems and runs CNI DEL.
func (n *Node) removeSandboxes() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+n.ContainerdSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("CRI socket %s: %w", n.ContainerdSocket, err)
	}
	defer conn.Close()
	rs := runtimeapi.NewRuntimeServiceClient(conn)
	resp, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing the pod sandboxes of node %s: %w", n.Name, err)
	}
	var errs []error
	for _, sb := range resp.Items {
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s (%s): %w", sb.Id, sb.Metadata.GetName(), err))
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s (%s): %w", sb.Id, sb.Metadata.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// removeLogLinks removes the kubelet's links in /var/log/containers to
// this node's pod logs (the kubelet removes them with the containers,
// but the containers were removed behind its back).
func (n *Node) removeLogLinks() error {
	const dir = "/var/log/containers"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil // none made
	}
	var errs []error
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, n.Dir+"/") {
			if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeCNIResults removes libcni's cached results of the node's network
// (/var/lib/cni/results/<network>-<sandbox>-<interface>), which CNI DEL
// removes for sandboxes torn down normally: any found is reported.
func (n *Node) removeCNIResults() error {
	left, _ := filepath.Glob(filepath.Join("/var/lib/cni/results", n.Name+"-*"))
	for _, p := range left {
		_ = os.Remove(p)
	}
	if len(left) > 0 {
		return fmt.Errorf("CNI results left (removed): %s", strings.Join(left, ", "))
	}
	return nil
}

// deleteFromAPI removes the node's pods (their containers are gone) and
// the Node, so that the control plane can host another node.
func (n *Node) deleteFromAPI() error {
	if n.cs == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := n.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
	if err != nil {
		return fmt.Errorf("listing the pods of node %s: %w", n.Name, err)
	}
	var errs []error
	zero := int64(0)
	for _, p := range pods.Items {
		err := n.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting pod %s/%s: %w", p.Namespace, p.Name, err))
		}
	}
	if err := n.cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting node %s: %w", n.Name, err))
	}
	return errors.Join(errs...)
}

// freePort returns a TCP port free at the moment (the kubelet binds it
// a second later; a collision makes the kubelet fail loudly).
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// RuntimeOptions configure StartRuntime.
type RuntimeOptions struct {
	// Containerd and Shim are as in Options.
	Containerd, Shim string
	// Runtimes is TOML appended to the node's containerd config: more
	// [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.NAME]
	// tables, the handlers a test starts sandboxes with.
	Runtimes string
}

// RuntimeTable is one handler's table for RuntimeOptions.Runtimes: its
// runtime type and shim path, and opts (TOML lines, may be empty) as its
// options table.
func RuntimeTable(name, typ, path, opts string) string {
	s := fmt.Sprintf("\n[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.%s]\n  runtime_type = %q\n  runtime_path = %q\n", name, typ, path)
	if opts != "" {
		s += fmt.Sprintf("  [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.%s.options]\n%s", name, opts)
	}
	return s
}

// StartSandboxHandlers starts a node's containerd alone (StartRuntime)
// with the three handlers the sandbox-proof tests need: kata-qemu on
// runc's shim, whose sandboxes start; kata-clh on the failing test shim
// (BuildFailShim), which fails as Kata's shim does; and kata-qemu-snp, a
// Kata runtime type on the same failing shim, for the cases that must
// never run it. The failing shim touches marker each time it runs.
func StartSandboxHandlers(t testing.TB, dir, marker string) *Node {
	t.Helper()
	testkit.NeedsTools(t, "a real containerd with runc and CNI, as root")
	fail := BuildFailShim(t, dir, marker)
	return StartRuntime(t, RuntimeOptions{Runtimes: RuntimeTable("kata-qemu", "io.containerd.runc.v2", os.Getenv(ShimEnv),
		fmt.Sprintf("    Root = %q\n", filepath.Join(dir, "runc"))) +
		RuntimeTable("kata-clh", "io.containerd.berth-fail.v2", fail, "") +
		RuntimeTable("kata-qemu-snp", "io.containerd.kata-qemu-snp.v2", fail, "")})
}

// StartRuntime starts a node's containerd alone, without a kubelet or a
// control plane: the same config (the pause image imported, a CNI bridge
// of its own, runc's shim) plus opts.Runtimes, so that a test can start
// pod sandboxes over CRI as the kubelet would. Stop (at the test's
// cleanup) removes what is left and fails the test on leaks.
func StartRuntime(t testing.TB, opts RuntimeOptions) *Node {
	t.Helper()
	testkit.NeedsTools(t, "a real containerd with runc and CNI, as root")
	if os.Geteuid() != 0 {
		t.Fatal("testnode runs containerd and must run as root")
	}
	bin, shim := opts.Containerd, opts.Shim
	if bin == "" {
		bin = os.Getenv(ContainerdEnv)
	}
	if shim == "" {
		shim = os.Getenv(ShimEnv)
	}
	for _, b := range []string{bin, shim} {
		if fi, err := os.Stat(b); b == "" || err != nil || fi.IsDir() {
			t.Fatalf("%q: not a binary (%v); %s", b, err, hint)
		}
	}
	var tl tools
	var err error
	if tl.runc, err = exec.LookPath("runc"); err != nil {
		t.Fatalf("runc: %v; %s", err, hint)
	}
	if tl.ctr, err = exec.LookPath("ctr"); err != nil {
		t.Fatalf("ctr: %v; %s", err, hint)
	}
	name := "berth-rt-" + randHex(4)
	dir, err := os.MkdirTemp("", "bn")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{
		Name:             name,
		Dir:              dir,
		ContainerdConfig: filepath.Join(dir, "containerd.toml"),
		ContainerdSocket: filepath.Join(dir, "c.sock"),
		Bridge:           "bn" + randHex(4),
		ctr:              tl.ctr,
	}
	if err := claimMachine(name); err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("stopping runtime %s: %v", n.Name, err)
		}
	})
	pause := buildImage(t, dir, "./internal/testkit/testnode/pause", "pause", PauseImage)
	if err := n.writeCNI(); err != nil {
		t.Fatal(err)
	}
	n.startContainerd(t, bin, containerdConfig(filepath.Join(dir, "containerd"), n.ContainerdSocket, shim, tl.runc, !canLowerOOMScore())+opts.Runtimes, pause)
	return n
}

// startContainerd writes conf as the node's containerd config, starts
// containerd bin under a supervisor until its CRI answers, and imports the
// pause image, which every pod sandbox needs.
func (n *Node) startContainerd(t testing.TB, bin, conf, pause string) {
	t.Helper()
	if err := os.WriteFile(n.ContainerdConfig, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	n.Containerd = NewSupervisor("containerd", []string{bin, "--config", n.ContainerdConfig}, n.criReady)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := n.Containerd.Start(ctx)
	cancel()
	if err != nil {
		t.Fatalf("%v\n%s", err, n.Containerd.Log())
	}
	if err := n.importImage(context.Background(), pause); err != nil {
		t.Fatal(err)
	}
}
