package testnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"berth.dev/berth/internal/host/mountinfo"
	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, testenv.Options{}, &env)) }

// TestNodeRunsAgentPod is the proof that the harness runs a real node: the
// kubelet registers and turns Ready, reports containerd's runc handler,
// the scheduler places pods by its hostname label into cgroups under the
// node's root, runc runs the agent image's berth-cluster with the host's
// root mounted read-only at /host, the API server fetches the logs from
// the kubelet, a containerd restart leaves the node serving and a running
// pod running, and Stop kills that pod and leaves nothing behind.
func TestNodeRunsAgentPod(t *testing.T) {
	testenv.Need(t)
	before := snapshotMachine(t)
	begin := time.Now()
	n := Start(t, env, Options{})
	cs := testenv.Clientset(t, env.Admin)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	handlers, err := cri.NodeRuntimeHandlers(ctx, env.Kubeconfig, n.Name)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(handlers, "runc") {
		t.Errorf("Node %s status.runtimeHandlers = %v, want runc (from containerd's CRI status)", n.Name, handlers)
	}
	t.Logf("Node.status.runtimeHandlers: %v", handlers)
	// containerd runs the config Start wrote: runc through the shim of
	// its own release and Debian's runc.
	st, err := cri.Query(ctx, n.ContainerdSocket, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatal(err)
	}
	if h := st.Handlers["runc"]; h.RuntimePath != os.Getenv(ShimEnv) || h.Options["BinaryName"] != runc {
		t.Errorf("containerd's runc handler: path %q, options %v; want %s and BinaryName %s", h.RuntimePath, h.Options, os.Getenv(ShimEnv), runc)
	}

	imgStart := time.Now()
	n.ImportImage(t, BuildAgentImage(t, t.TempDir()))
	t.Logf("agent image built and imported in %s", time.Since(imgStart).Round(time.Millisecond))

	// A pod that runs until the node stops (the pause image again): it
	// must live through the containerd restart, and Stop must kill it.
	sleeper := sleeperPod(n.Name)
	if _, err := cs.CoreV1().Pods(sleeper.Namespace).Create(ctx, sleeper, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPod(t, n, sleeper.Namespace, sleeper.Name, corev1.PodRunning)
	// The kubelet made its pod cgroups under the node's own root, and the
	// pod's processes are there.
	if procs, err := cgroupProcs(n.CgroupRoot); err != nil || len(procs) == 0 {
		t.Errorf("no process in the cgroups under %s (%v)", n.CgroupRoot, err)
	}

	podStart := time.Now()
	pod := agentPod(n.Name)
	if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(t, n, pod.Namespace, pod.Name, corev1.PodSucceeded)
	if got.Spec.NodeName != n.Name {
		t.Errorf("pod scheduled to %q, want %q", got.Spec.NodeName, n.Name)
	}
	t.Logf("pod Succeeded %s after creation; %s after Start began (the agent image built meanwhile)",
		time.Since(podStart).Round(time.Millisecond), time.Since(begin).Round(time.Millisecond))

	logs := map[string]string{}
	for _, c := range pod.Spec.Containers {
		raw, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs of %s (API server -> kubelet): %v", c.Name, err)
		}
		logs[c.Name] = string(raw)
	}
	if want := "berth testnode\n"; !strings.HasPrefix(logs["version"], want) {
		t.Errorf("log of /berth version = %q, want it to start with %q", logs["version"], want)
	}
	var facts struct {
		Root string `json:"root"`
		Live bool   `json:"live"`
		OS   struct {
			PrettyName string `json:"prettyName"`
		} `json:"os"`
	}
	if err := json.Unmarshal([]byte(logs["facts"]), &facts); err != nil {
		t.Fatalf("log of /berth facts is not JSON: %v\n%s", err, logs["facts"])
	}
	// The image is a single binary on an empty base: an OS name can only
	// come from the host's /etc/os-release through the hostPath volume.
	if want := hostPrettyName(t); facts.Root != "/host" || facts.OS.PrettyName != want {
		t.Errorf("facts in the pod: root %q, os %q; want /host and the host's %q", facts.Root, facts.OS.PrettyName, want)
	}

	// A restart through the supervisor: a new containerd process that
	// serves CRI, and a kubelet that still reports the node Ready.
	pid := n.Containerd.PID()
	if err := n.RestartContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Containerd.PID() == pid || n.Containerd.Starts() != 2 {
		t.Errorf("after RestartContainerd: pid %d (was %d), %d starts; want a new process, 2 starts", n.Containerd.PID(), pid, n.Containerd.Starts())
	}
	if err := n.waitReady(time.Minute); err != nil {
		t.Errorf("after RestartContainerd: %v", err)
	}
	if p, err := cs.CoreV1().Pods(sleeper.Namespace).Get(ctx, sleeper.Name, metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if id, was := containerID(p), containerID(running); p.Status.Phase != corev1.PodRunning || id != was {
		t.Errorf("after RestartContainerd: pod %s is %s with container %s (was %s); want it running on", p.Name, p.Status.Phase, id, was)
	}

	if err := n.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	checkNodeGone(t, n)
	after := snapshotMachine(t)
	for _, d := range before.diff(after) {
		t.Errorf("left on the machine: %s", d)
	}
}

// agentPod runs the agent image's berth-cluster twice: `version`, and
// `facts` on the host root mounted read-only at /host, as the agent
// DaemonSet mounts it. The scheduler places it by the hostname label.
func agentPod(node string) *corev1.Pod {
	f := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "berth-agent-" + node, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector:                 map[string]string{"kubernetes.io/hostname": node},
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: &f,
			DNSPolicy:                    corev1.DNSDefault,
			Containers: []corev1.Container{
				{Name: "version", Image: AgentImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/berth", "version"}},
				{
					Name: "facts", Image: AgentImage, ImagePullPolicy: corev1.PullNever,
					Command:      []string{"/berth", "facts", "--root=/host", "-o", "json"},
					VolumeMounts: []corev1.VolumeMount{{Name: "host", MountPath: "/host", ReadOnly: true}},
				},
			},
			Volumes: []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		},
	}
}

// sleeperPod runs the pause image, which sleeps until it is stopped.
func sleeperPod(node string) *corev1.Pod {
	f := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper-" + node, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeSelector:                 map[string]string{"kubernetes.io/hostname": node},
			AutomountServiceAccountToken: &f,
			DNSPolicy:                    corev1.DNSDefault,
			Containers:                   []corev1.Container{{Name: "sleep", Image: PauseImage, ImagePullPolicy: corev1.PullNever}},
		},
	}
}

// containerID is the first container's runtime ID.
func containerID(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	return p.Status.ContainerStatuses[0].ContainerID
}

// waitPod waits until the pod is in phase, failing with its status,
// events and the kubelet's log when it fails or takes over two minutes.
func waitPod(t *testing.T, n *Node, ns, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := testenv.Clientset(t, env.Admin)
	var p *corev1.Pod
	for {
		var err error
		p, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == phase {
			return p
		}
		if err == nil && p.Status.Phase == corev1.PodFailed || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	st, _ := json.MarshalIndent(p.Status, "", "  ")
	var evs []string
	if list, err := cs.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{}); err == nil {
		for _, e := range list.Items {
			evs = append(evs, e.Reason+": "+e.Message)
		}
	}
	t.Fatalf("pod %s/%s did not reach %s: phase %s\n%s\nevents:\n%s\n--- kubelet log (tail):\n%s", ns, name, phase, p.Status.Phase, st,
		strings.Join(evs, "\n"), tail(n.Kubelet.Log(), 80))
	return nil
}

func hostPrettyName(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	t.Fatal("/etc/os-release has no PRETTY_NAME")
	return ""
}

// checkNodeGone asserts that nothing carrying the node's identity is left:
// its directory, mounts, cgroups, bridge, processes and API objects.
func checkNodeGone(t *testing.T, n *Node) {
	t.Helper()
	if _, err := os.Stat(n.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("node directory %s still exists (%v)", n.Dir, err)
	}
	if mps, _ := mountsUnder(n.Dir); len(mps) > 0 {
		t.Errorf("still mounted: %v", mps)
	}
	if dirs, _ := cgroupDirs(n.CgroupRoot); len(dirs) > 0 {
		t.Errorf("cgroups left: %v", dirs)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.Bridge)); err == nil {
		t.Errorf("bridge %s left", n.Bridge)
	}
	if pids := processesMentioning(n.Dir + "/"); len(pids) > 0 {
		t.Errorf("processes of the node left: %v", pids)
	}
	cs := testenv.Clientset(t, env.Admin)
	if _, err := cs.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Node %s still in the API (%v)", n.Name, err)
	}
}

// machine is what a node could leave behind on the machine as a whole.
type machine struct {
	mounts   map[string]bool // mount points
	cgroups  map[string]bool // top-level cgroups of every hierarchy
	links    map[string]bool // network interfaces
	paths    map[string]bool // shared paths and the registry that exist
	tunables map[string]string
	registry bool // another test node (of another package) runs
}

func snapshotMachine(t *testing.T) machine {
	t.Helper()
	m := machine{mounts: map[string]bool{}, cgroups: map[string]bool{}, links: map[string]bool{}, paths: map[string]bool{}, tunables: map[string]string{}}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 {
			m.mounts[mountinfo.Unescape(fields[4])] = true
		}
	}
	mps, err := cgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range mps {
		ents, _ := os.ReadDir(mp)
		for _, e := range ents {
			if e.IsDir() && !otherNode(e.Name()) {
				m.cgroups[filepath.Join(mp, e.Name())] = true
			}
		}
	}
	links, _ := os.ReadDir("/sys/class/net")
	for _, l := range links {
		m.links[l.Name()] = true
	}
	for _, p := range append(slices.Clone(sharedPaths), registryDir, "/var/run/netns", "/run/netns", "/var/run/nri", "/opt/containerd") {
		if _, err := os.Lstat(p); err == nil {
			m.paths[p] = true
		}
	}
	for _, k := range tunables {
		v, _ := os.ReadFile(filepath.Join("/proc/sys", k))
		m.tunables[k] = strings.TrimSpace(string(v))
	}
	_, err = os.Stat(registryDir)
	m.registry = err == nil
	return m
}

// otherNode tells a cgroup of a test node (possibly another package's,
// running meanwhile); this test's own is checked by checkNodeGone.
func otherNode(name string) bool { return strings.HasPrefix(name, "berth-node-") }

// diff lists what after has that m had not, or has changed. The shared
// paths and tunables are compared only when no other test node runs:
// until the last one stops they are theirs.
func (m machine) diff(after machine) []string {
	var out []string
	newKeys := func(what string, a, b map[string]bool) {
		for _, k := range slices.Sorted(maps.Keys(b)) {
			if !a[k] {
				out = append(out, what+" "+k)
			}
		}
	}
	// Another package's node (internal/cluster/e2e's, say) may run meanwhile:
	// its mounts are under its own directory, as this node's are, which
	// checkNodeGone checks.
	nodeDirs := filepath.Join(os.TempDir(), "bn")
	for mp := range after.mounts {
		if strings.HasPrefix(mp, nodeDirs) {
			delete(after.mounts, mp)
		}
	}
	newKeys("mount", m.mounts, after.mounts)
	newKeys("cgroup", m.cgroups, after.cgroups)
	for _, l := range slices.Sorted(maps.Keys(after.links)) {
		if !m.links[l] && !strings.HasPrefix(l, "bn") && !strings.HasPrefix(l, "veth") {
			out = append(out, "network interface "+l)
		}
	}
	if after.registry {
		return out
	}
	newKeys("path", m.paths, after.paths)
	for _, k := range tunables {
		if m.tunables[k] != after.tunables[k] {
			out = append(out, "sysctl "+k+" "+m.tunables[k]+" -> "+after.tunables[k])
		}
	}
	return out
}
