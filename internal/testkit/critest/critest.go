// Package critest starts real containerd daemons for tests, confined to
// temporary root, state and socket paths, and fails loudly when the
// binaries the CI installs (.ci/tools.sh) are missing.
package critest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"berth.dev/berth/internal/node/cri"
	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/upstreamtest"
)

// ContainerdBin returns the containerd binary named by env, failing the
// test loudly when the tools were not installed: these tests are the proof
// that what berth writes is what containerd loads, so they never skip.
func ContainerdBin(t *testing.T, env string) string {
	t.Helper()
	testkit.NeedsTools(t, "a real containerd, as root")
	p := os.Getenv(env)
	if p == "" {
		t.Fatalf("%s is not set: run `make tools` (.ci/tools.sh) and source .ci/tools.env", env)
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		t.Fatalf("%s=%s: not a binary (%v): run `make tools`", env, p, err)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("the containerd integration tests run containerd and must run as root")
	}
	return p
}

// Containerd is one of the containerd binaries of BERTH_CONTAINERDS.
type Containerd struct {
	// Version is the release, as .ci/tools.sh names it ("1.6.20", "2.4.2").
	Version string
	Bin     string
}

// Major is the version's first number.
func (c Containerd) Major() int { return c.part(0) }

// Minor is the version's second number.
func (c Containerd) Minor() int { return c.part(1) }

func (c Containerd) part(i int) int {
	f := strings.SplitN(c.Version, ".", 3)
	if i >= len(f) {
		return 0
	}
	n, _ := strconv.Atoi(f[i])
	return n
}

// Containerds returns every containerd of BERTH_CONTAINERDS (VERSION=PATH
// pairs separated by spaces, Debian's first, as .ci/tools.sh writes them),
// failing the test loudly when the variable is unset, a binary is missing,
// or a version of tools/containerd-versions is not in it (a tools.env from
// before the list changed).
func Containerds(t testing.TB) []Containerd {
	t.Helper()
	const env = "BERTH_CONTAINERDS"
	testkit.NeedsTools(t, "the real containerds of "+env+", as root")
	s := os.Getenv(env)
	if s == "" {
		t.Fatalf("%s is not set: run `make tools` (.ci/tools.sh) and source .ci/tools.env", env)
	}
	if os.Geteuid() != 0 {
		t.Fatalf("the containerd integration tests run containerd and must run as root")
	}
	var out []Containerd
	for _, f := range strings.Fields(s) {
		v, bin, ok := strings.Cut(f, "=")
		if !ok || v == "" || !filepath.IsAbs(bin) {
			t.Fatalf("%s: %q is not VERSION=/PATH: run `make tools`", env, f)
		}
		if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
			t.Fatalf("%s: containerd %s at %s: not a binary (%v): run `make tools`", env, v, bin, err)
		}
		out = append(out, Containerd{Version: v, Bin: bin})
	}
	list := filepath.Join(upstreamtest.RepoRoot(t), "tools", "containerd-versions")
	data, err := os.ReadFile(list)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		v, _, _ := strings.Cut(line, "#")
		if v = strings.TrimSpace(v); v != "" && !slices.ContainsFunc(out, func(c Containerd) bool { return c.Version == v }) {
			t.Fatalf("%s has no containerd %s, which %s lists: run `make tools` and source .ci/tools.env again", env, v, list)
		}
	}
	return out
}

// Dirs are containerd's own root, state and sockets: short paths
// outside the host root (unix socket paths are limited to 108 bytes).
type Dirs struct{ Dir, Sock string }

// NewDirs makes a fresh Dirs under the temporary directory, removed at the
// test's cleanup.
func NewDirs(t *testing.T) Dirs {
	t.Helper()
	dir, err := os.MkdirTemp("", "bc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return Dirs{Dir: dir, Sock: filepath.Join(dir, "c.sock")}
}

// BaseConfig is a kubeadm-style main config of version v that keeps the
// daemon off the host: its own root, state and sockets, no privileged
// snapshotters, and CRI settings that pull nothing.
func BaseConfig(d Dirs, v int, imports string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version = %d\n", v)
	if imports != "" {
		fmt.Fprintf(&b, "imports = [%q]\n", imports)
	}
	fmt.Fprintf(&b, "root = %q\nstate = %q\n", filepath.Join(d.Dir, "root"), filepath.Join(d.Dir, "state"))
	b.WriteString(`disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp"]` + "\n")
	fmt.Fprintf(&b, "\n[grpc]\n  address = %q\n\n[ttrpc]\n  address = %q\n\n[debug]\n  address = %q\n",
		d.Sock, d.Sock+".ttrpc", d.Sock+".debug")
	cni := fmt.Sprintf("  [plugins.%%q.cni]\n    bin_dir = %q\n    conf_dir = %q\n", filepath.Join(d.Dir, "cni/bin"), filepath.Join(d.Dir, "cni/conf"))
	if v == 2 {
		fmt.Fprintf(&b, "\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %q\n", filepath.Join(d.Dir, "opt"))
		b.WriteString(`
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
`)
		fmt.Fprintf(&b, cni, "io.containerd.grpc.v1.cri")
		return b.String()
	}
	b.WriteString(`
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "registry.k8s.io/pause:3.10"

[plugins."io.containerd.cri.v1.runtime"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
`)
	fmt.Fprintf(&b, cni, "io.containerd.cri.v1.runtime")
	return b.String()
}

// StartContainerd runs bin with config and waits for its CRI service to
// answer; the returned function (also run at cleanup) kills it.
func StartContainerd(t *testing.T, bin, config string, d Dirs) func() {
	t.Helper()
	var log bytes.Buffer
	cmd := exec.Command(bin, "--config", config)
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		os.Remove(d.Sock)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := cri.Query(context.Background(), d.Sock, time.Second); err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("%s --config %s exited: %v\n%s", bin, config, err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("%s did not answer CRI on %s within 20s\n%s", bin, d.Sock, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var once sync.Once
	stopOnce := func() { once.Do(stop) }
	t.Cleanup(stopOnce)
	return stopOnce
}

// nsScript runs as root inside the new mount namespace (made private by
// the Go runtime for CLONE_NEWNS) and then becomes containerd. It hides
// the paths a config written for a real node uses (root
// /var/lib/containerd, state and sockets under /run, /opt/containerd, CNI
// in /etc/cni and /opt/cni, NRI under /var/run/nri, CDI in /etc/cdi) behind
// private, throw-away file systems, so that the config runs unchanged
// without touching the machine or another test: /etc and /var are overlays
// whose writes vanish with the namespace; /run, /opt and
// /var/lib/containerd are empty tmpfs (the overlay snapshotter refuses an
// overlay as its root); /etc/containerd is the test root's. $1 is the
// test root, $2 a scratch directory for the overlays' upper layers; the
// rest is containerd's command line. The scratch tmpfs, the overlays and
// the binds exist only in this namespace: they vanish when containerd, its
// last process, exits, whatever the test does.
const nsScript = `set -eu
root=$1 scratch=$2
shift 2
mount -t tmpfs -o mode=0700 berth-scratch "$scratch"
for d in etc var; do
	mkdir -p "$scratch/$d/upper" "$scratch/$d/work"
	mount -t overlay -o "lowerdir=/$d,upperdir=$scratch/$d/upper,workdir=$scratch/$d/work" berth-$d "/$d"
done
# The machine's own /etc/containerd (Debian's package ships one) must not
# leak in: the test root's is used, and a root without one has none.
rm -rf /etc/containerd
if [ -d "$root/etc/containerd" ]; then
	mkdir /etc/containerd
	mount --bind "$root/etc/containerd" /etc/containerd
fi
mount -t tmpfs -o mode=0755 berth-run /run
# A service the test runs beside containerd (berth's nydus-snapshotter)
# serves under the test root's run/: each directory there is the same
# directory of /run here.
for d in "$root"/run/*/; do
	[ -d "$d" ] || continue
	n=$(basename "$d")
	mkdir -p "/run/$n"
	mount --bind "$d" "/run/$n"
done
mount -t tmpfs -o mode=0755 berth-opt /opt
mkdir -p /var/lib/containerd
mount -t tmpfs -o mode=0711 berth-containerd /var/lib/containerd
exec "$@"
`

// startTimeout bounds how long a containerd may take to answer CRI.
const startTimeout = 20 * time.Second

// Daemon is a containerd started by StartOnRoot.
type Daemon struct {
	// Bin is the containerd binary, Root the test root it runs on.
	Bin, Root string
	Dirs      Dirs
	// Status is what containerd answered over CRI once it was up: its
	// version and live handlers.
	Status *cri.Status

	cmd  *exec.Cmd
	log  *logBuffer
	done chan struct{} // closed when the process has been reaped
	err  error         // the exit status, once done is closed
	once sync.Once
}

// StartOnRoot runs containerd bin as a node would, on root's config file
// byte for byte: in a private mount namespace where root's etc/containerd
// is /etc/containerd (no config file there means containerd's built-in
// defaults, a real case), /etc and /var are throw-away overlays and /run,
// /opt and /var/lib/containerd are empty tmpfs (see nsScript). It starts
// `containerd --address d.Sock --config /etc/containerd/config.toml` (no
// --config when root has no config file): --address moves the CRI socket
// out of the private /run to where the test can reach it. It waits for CRI
// to answer and records the answer in Status.
//
// Unlike StartContainerd it returns an error, with containerd's log, when
// containerd exits or does not answer CRI within 20 s: tests use it to show
// that a config is broken, not only that one works. The daemon (its whole
// process group) is killed by Stop and at the test's cleanup. One daemon
// may run per Dirs at a time.
func StartOnRoot(t testing.TB, bin, root string, d Dirs) (*Daemon, error) {
	t.Helper()
	for _, p := range []string{root, d.Sock, d.Dir} {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("StartOnRoot: %s is not an absolute path", p)
		}
		for _, h := range [...]string{"/etc", "/var", "/run", "/opt"} { // what nsScript covers
			if p == h || strings.HasPrefix(p, h+"/") {
				return nil, fmt.Errorf("StartOnRoot: %s is under %s, which containerd's namespace hides", p, h)
			}
		}
	}
	scratch := filepath.Join(d.Dir, "ns")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return nil, err
	}
	dm := &Daemon{Bin: bin, Root: root, Dirs: d, log: &logBuffer{}, done: make(chan struct{})}
	args := []string{"-c", nsScript, "berth-ns", root, scratch, bin, "--address", d.Sock}
	// Without a config file containerd must start as a node's systemd unit
	// starts it, with no --config: every version ignores a missing file at
	// the default path, but 1.6 refuses a --config naming a missing file.
	if _, err := os.Stat(filepath.Join(root, "etc/containerd/config.toml")); err == nil {
		args = append(args, "--config", "/etc/containerd/config.toml")
	}
	dm.cmd = exec.Command("/bin/sh", args...)
	dm.cmd.Stdout, dm.cmd.Stderr = dm.log, dm.log
	// Its own process group, killed whole by Stop; Pdeathsig so that a
	// test binary killed before its cleanup does not leave it running.
	dm.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Unshareflags: syscall.CLONE_NEWNS}
	if err := dm.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		dm.err = dm.cmd.Wait()
		close(dm.done)
	}()
	t.Cleanup(dm.Stop)

	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for {
		st, err := cri.Query(context.Background(), d.Sock, time.Second)
		if err == nil {
			dm.Status = st
			return dm, nil
		}
		lastErr = err
		// containerd logs "successfully booted" once every plugin that
		// could load has loaded and the gRPC server serves: a CRI service
		// still unknown then will never come (a config the CRI plugin
		// refuses), so there is no point waiting out the timeout.
		if status.Code(err) == codes.Unimplemented && strings.Contains(dm.Log(), "successfully booted") {
			dm.Stop()
			return nil, fmt.Errorf("containerd %s on %s runs without its CRI plugin (%v)\n%s", bin, root, err, dm.Log())
		}
		select {
		case <-dm.done:
			return nil, fmt.Errorf("containerd %s on %s exited before answering CRI: %v\n%s", bin, root, dm.err, dm.Log())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			dm.Stop()
			return nil, fmt.Errorf("containerd %s on %s did not answer CRI on %s within %s (last: %v)\n%s",
				bin, root, d.Sock, startTimeout, lastErr, dm.Log())
		}
	}
}

// Query asks the running daemon over CRI again.
func (dm *Daemon) Query() (*cri.Status, error) {
	return cri.Query(context.Background(), dm.Dirs.Sock, 5*time.Second)
}

// Log is what containerd (and the namespace set-up before it) wrote so far.
func (dm *Daemon) Log() string { return dm.log.String() }

// Stop kills containerd's process group and waits for it; the sockets it
// left outside the namespace are removed so the Dirs can be used again.
// Safe to call more than once.
func (dm *Daemon) Stop() {
	dm.once.Do(func() {
		_ = syscall.Kill(-dm.cmd.Process.Pid, syscall.SIGKILL)
		<-dm.done
		for _, s := range []string{dm.Dirs.Sock, dm.Dirs.Sock + ".ttrpc"} {
			_ = os.Remove(s)
		}
	})
}

// logBuffer collects a daemon's output while the test reads it; it keeps
// the first maxLog bytes, enough for any start-up failure.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

const maxLog = 1 << 20

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := maxLog - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// RunOnRoot runs bin with args in the namespace StartOnRoot gives
// containerd (the test root's /etc/containerd, private /run, /opt and
// /var/lib/containerd) and returns its combined output: `containerd
// config dump`, say, which prints the config the daemon would run with,
// imports merged. The error carries what it wrote to stderr.
func RunOnRoot(t testing.TB, bin, root string, d Dirs, args ...string) ([]byte, error) {
	t.Helper()
	scratch := filepath.Join(d.Dir, "ns-run")
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", nsScript, "berth-ns", root, scratch, bin}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Unshareflags: syscall.CLONE_NEWNS}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}
