package testnode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/mountinfo"
)

// What a test node changes outside its own directory, and how it is put
// back. Most of a node lives under its temporary directory, but a few
// things are fixed machine-wide by the programs themselves:
//
//   - kubelet's device manager serves /var/lib/kubelet/device-plugins/
//     (pluginapi.KubeletSocket, not under --root-dir) and wipes that
//     directory at start; kubelet also links container logs into
//     /var/log/containers;
//   - containerd's shims put their sockets in /run/containerd/s, and
//     libcni caches results under /var/lib/cni;
//   - kubelet sets six kernel tunables (vm.overcommit_memory,
//     vm.panic_on_oom, kernel.panic, kernel.panic_on_oops,
//     kernel.keys.root_max{keys,bytes}: setupKernelTunables, which
//     modifies them unless protectKernelDefaults makes it refuse to start)
//     and the CNI bridge plugin sets net.ipv4.ip_forward for its gateway;
//   - a pod's hostPath volume with mountPropagation HostToContainer (the
//     node-installer's view of the host) needs the source's mount to be
//     shared or a slave (containerd refuses a private one): systemd makes
//     / shared at boot on every real node, but a machine without systemd
//     may have it private, so the first node makes / shared (that mount
//     alone, not recursively) and the last one makes it private again.
//
// Nodes of concurrent test processes share these, so a registry under
// /run (a tmpfs: it cannot outlive a reboot) records, when the first node
// starts, which of the paths existed and the tunables' values; the last
// node to stop removes the paths the nodes created and restores the
// values. A machine whose /var/lib/kubelet existed before any test node
// runs a real kubelet, whose device plugins a test kubelet would wipe:
// Start refuses it.

// registryDir holds one file per running node and the machine's state
// from before the first one.
const registryDir = "/run/berth-testnode"

// sharedPaths are the machine-wide directories nodes may create.
var sharedPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/lib/cni", "/run/containerd"}

// tunables are the sysctls (as paths under /proc/sys) kubelet and the CNI
// bridge plugin change.
var tunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
}

// machineState is what the first node found.
type machineState struct {
	Existed  map[string]bool   `json:"existed"`
	Tunables map[string]string `json:"tunables"`
	// RootPrivate records that / was a private mount, which the nodes
	// made shared.
	RootPrivate bool `json:"rootPrivate,omitempty"`
}

// lockRegistry serialises claims and releases across processes with an
// flock on /run itself, which always exists and which nothing else locks.
func lockRegistry() (unlock func(), err error) {
	f, err := os.Open("/run")
	if err != nil {
		return nil, fmt.Errorf("opening /run to lock the test node registry: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking /run for the test node registry: %w", err)
	}
	return func() { f.Close() }, nil // closing drops the lock
}

// claimMachine registers node name (run by this process) and, for the
// first node, records the machine's state.
func claimMachine(name string) error {
	unlock, err := lockRegistry()
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.MkdirAll(registryDir, 0o700); err != nil {
		return fmt.Errorf("test node registry: %w", err)
	}
	live, err := liveMembers()
	if err != nil {
		return err
	}
	statePath := filepath.Join(registryDir, "state.json")
	if len(live) == 0 {
		if _, err := os.Stat(statePath); errors.Is(err, fs.ErrNotExist) {
			st := machineState{Existed: map[string]bool{}, Tunables: map[string]string{}}
			for _, p := range sharedPaths {
				_, err := os.Lstat(p)
				st.Existed[p] = err == nil
			}
			for _, k := range tunables {
				v, err := os.ReadFile(filepath.Join("/proc/sys", k))
				if err != nil {
					return fmt.Errorf("reading /proc/sys/%s: %w", k, err)
				}
				st.Tunables[k] = strings.TrimSpace(string(v))
			}
			prop, err := rootPropagation()
			if err != nil {
				return err
			}
			st.RootPrivate = prop == "private"
			data, _ := json.Marshal(st)
			if err := os.WriteFile(statePath, data, 0o600); err != nil {
				return fmt.Errorf("test node registry: %w", err)
			}
		}
		// Otherwise nodes of a process that died without stopping them
		// left the state: it is still the machine's from before them.
	}
	st, err := readState()
	if err != nil {
		return err
	}
	if st.Existed["/var/lib/kubelet"] {
		return errors.New("/var/lib/kubelet existed before any test node started: a real kubelet may run on this machine, " +
			"and a test kubelet's device manager would wipe its /var/lib/kubelet/device-plugins; " +
			"run the tests on a machine that is not a Kubernetes node (or remove the directory if it is a leftover)")
	}
	if st.RootPrivate {
		if err := unix.Mount("", "/", "", unix.MS_SHARED, ""); err != nil {
			return fmt.Errorf("making / a shared mount (as systemd does) for HostToContainer volumes: %w", err)
		}
	}
	member := filepath.Join(registryDir, "node-"+name)
	if err := os.WriteFile(member, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return fmt.Errorf("test node registry: %w", err)
	}
	return nil
}

// releaseMachine unregisters node name; the last node puts the machine
// back: the shared paths the nodes created are removed, the tunables
// restored.
func releaseMachine(name string) error {
	unlock, err := lockRegistry()
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(filepath.Join(registryDir, "node-"+name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("test node registry: %w", err)
	}
	live, err := liveMembers()
	if err != nil || len(live) > 0 {
		return err
	}
	st, err := readState()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range sharedPaths {
		if st.Existed[p] {
			continue
		}
		if p == "/var/lib/kubelet" {
			// Only the device manager's socket and checkpoint are in it.
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if err := removeEmptyTree(p); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range tunables {
		p := filepath.Join("/proc/sys", k)
		v, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if want := st.Tunables[k]; strings.TrimSpace(string(v)) != want {
			if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s to %s: %w", p, want, err))
			}
		}
	}
	if st.RootPrivate {
		if err := unix.Mount("", "/", "", unix.MS_PRIVATE, ""); err != nil {
			errs = append(errs, fmt.Errorf("making / a private mount again: %w", err))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, os.RemoveAll(registryDir))
	}
	return errors.Join(errs...)
}

// rootPropagation is the propagation of this mount namespace's / mount:
// shared, slave or private (mountinfo's optional fields; the last entry
// for / is the mount on top).
func rootPropagation() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("reading the mount table: %w", err)
	}
	prop := ""
	for line := range strings.Lines(string(data)) {
		fields := strings.Fields(line)
		if len(fields) < 7 || fields[4] != "/" {
			continue
		}
		prop = "private"
		for _, f := range fields[6:] {
			if f == "-" {
				break
			}
			switch {
			case strings.HasPrefix(f, "shared:"):
				prop = "shared"
			case strings.HasPrefix(f, "master:") && prop != "shared":
				prop = "slave"
			}
		}
	}
	if prop == "" {
		return "", errors.New("no / in /proc/self/mountinfo")
	}
	return prop, nil
}

func readState() (machineState, error) {
	var st machineState
	data, err := os.ReadFile(filepath.Join(registryDir, "state.json"))
	if err != nil {
		return st, fmt.Errorf("test node registry: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, fmt.Errorf("test node registry: %s/state.json: %w", registryDir, err)
	}
	return st, nil
}

// liveMembers lists the registered nodes whose process still runs, and
// forgets the others.
func liveMembers() ([]string, error) {
	ents, err := os.ReadDir(registryDir)
	if err != nil {
		return nil, fmt.Errorf("test node registry: %w", err)
	}
	var live []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "node-") {
			continue
		}
		p := filepath.Join(registryDir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("test node registry: %w", err)
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			live = append(live, e.Name())
			continue
		}
		_ = os.Remove(p)
	}
	return live, nil
}

// removeEmptyTree removes dir and the empty directories under it; a file
// left inside is an error naming it.
func removeEmptyTree(dir string) error {
	var dirs, files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(files) > 0 {
		return fmt.Errorf("test nodes left files in %s: %s", dir, strings.Join(files, ", "))
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		if err := os.Remove(d); err != nil {
			return err
		}
	}
	return nil
}

// mountsUnder lists the mount points at or under dir, deepest (last
// mounted) first.
func mountsUnder(dir string) ([]string, error) {
	var out []string
	err := eachMount(func(m mountinfo.Mount) {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			out = append(out, m.Point)
		}
	})
	slices.Reverse(out)
	return out, err
}

// eachMount calls fn for each of this process's mounts, in mount order.
func eachMount(fn func(mountinfo.Mount)) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	ms, err := mountinfo.Parse(f)
	for _, m := range ms {
		fn(m)
	}
	return err
}

// unmountAll unmounts everything at or under dir, lazily when a mount is
// busy; it returns what it had to unmount.
func unmountAll(dir string) ([]string, error) {
	var done []string
	var errs []error
	for range 5 { // stacked mounts need one pass per layer
		mps, err := mountsUnder(dir)
		if err != nil {
			return done, err
		}
		if len(mps) == 0 {
			return done, nil
		}
		for _, mp := range mps {
			if err := unix.Unmount(mp, 0); err != nil {
				if err = unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
					errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
					continue
				}
			}
			done = append(done, mp)
		}
	}
	mps, _ := mountsUnder(dir)
	if len(mps) > 0 {
		errs = append(errs, fmt.Errorf("still mounted under %s: %s", dir, strings.Join(mps, ", ")))
	}
	return done, errors.Join(errs...)
}

// cgroupMounts lists the mount points of every cgroup hierarchy (v1
// controllers and named hierarchies, and cgroup2 whether unified or the
// hybrid /sys/fs/cgroup/unified).
func cgroupMounts() ([]string, error) {
	var out []string
	err := eachMount(func(m mountinfo.Mount) {
		if m.FSType == "cgroup" || m.FSType == "cgroup2" {
			out = append(out, m.Point)
		}
	})
	return out, err
}

// cgroup2Unified tells whether /sys/fs/cgroup is a cgroup v2 hierarchy.
func cgroup2Unified() bool {
	var st unix.Statfs_t
	return unix.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}

// createCgroupRoot creates the cgroup root (a cgroupfs path like
// "/berth-node-x") kubelet requires to exist in every hierarchy it checks
// (cgroupV1impl.Validate: cpu, cpuacct, cpuset, memory, pids, systemd,
// hugetlb); it is made in every v1 hierarchy. On cgroup v2 one directory
// is enough: runc enables the controllers below it.
func createCgroupRoot(root string) error {
	if cgroup2Unified() {
		return mkdirCgroup(filepath.Join("/sys/fs/cgroup", root))
	}
	mps, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, mp := range mps {
		var st unix.Statfs_t
		if unix.Statfs(mp, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
			continue // hybrid: the v1 controllers are what kubelet and runc use
		}
		dir := filepath.Join(mp, root)
		if err := mkdirCgroup(dir); err != nil {
			return err
		}
		// A new v1 cpuset has no CPUs and no memory nodes, and no task can
		// join it or its children until they are copied from the parent.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(mp, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("setting %s of %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

func mkdirCgroup(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	return nil
}

// cgroupDirs lists root's directory in every hierarchy, with everything
// below it, deepest first.
func cgroupDirs(root string) ([]string, error) {
	mps, err := cgroupMounts()
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, mp := range mps {
		err := filepath.WalkDir(filepath.Join(mp, root), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Reverse(dirs) // a pre-order walk reversed puts children before parents
	return dirs, nil
}

// cgroupProcs lists the processes in root's cgroups of every hierarchy.
func cgroupProcs(root string) ([]int, error) {
	dirs, err := cgroupDirs(root)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for f := range strings.FieldsSeq(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
				pids = append(pids, pid)
			}
		}
	}
	return pids, nil
}

// removeCgroups removes root's cgroups in every hierarchy; the caller has
// made sure no process is left in them (an empty cgroup may still be busy
// for a moment after its last process exits, hence the retries).
func removeCgroups(root string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		dirs, err := cgroupDirs(root)
		if err != nil {
			return err
		}
		var errs []error
		for _, d := range dirs {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
		if len(errs) == 0 || time.Now().After(deadline) {
			return errors.Join(errs...)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesMentioning lists the processes whose command line contains
// any of needles (containerd's shims name its socket).
func processesMentioning(needles ...string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		s := string(cmdline)
		for _, n := range needles {
			if strings.Contains(s, n) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// killAndWait kills pids (processes this node started, found by its paths
// or cgroups) and waits up to 10 s for them to disappear.
func killAndWait(pids []int) error {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var left []string
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil {
				// A zombie is gone for our purposes once its parent (a shim,
				// killed too) is gone; /proc/<pid>/stat says which it is.
				if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !isZombie(st) {
					left = append(left, strconv.Itoa(pid))
				}
			}
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still running after SIGKILL: %s", strings.Join(left, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func isZombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// deleteLink removes a network interface (the node's CNI bridge) if it
// exists.
func deleteLink(name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	out, err := exec.Command("ip", "link", "delete", name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip link delete %s: %v: %s", name, err, out)
	}
	return nil
}

// capSysResource is CAP_SYS_RESOURCE's bit (linux/capability.h).
const capSysResource = 24

// canLowerOOMScore tells whether this process may set negative OOM score
// adjustments: it needs CAP_SYS_RESOURCE, which some sandboxes (the
// Firecracker VM of the build machine) drop from the bounding set.
func canLowerOOMScore() bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && caps&(1<<capSysResource) != 0
		}
	}
	return false
}
