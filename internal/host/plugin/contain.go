package plugin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/mountinfo"
)

// Isolation says how the processes of a check are contained, so that
// nothing a check starts outlives it, double forks into a new session
// (setsid) included: a process group does not hold those.
type Isolation string

const (
	// IsolateAuto uses a cgroup when the cgroup v2 hierarchy is
	// writable, else the subreaper.
	IsolateAuto Isolation = ""
	// IsolateCgroup runs each check in a cgroup v2 of its own, created
	// under berth's cgroup, and kills the whole cgroup at the end
	// (cgroup.kill; on kernels without it, freeze and kill every member).
	// The check is started inside it (clone3 CLONE_INTO_CGROUP), so no
	// fork can happen outside. When no cgroup can be made, the check
	// runs with the subreaper instead.
	IsolateCgroup Isolation = "cgroup"
	// IsolateSubreaper makes berth a child subreaper
	// (PR_SET_CHILD_SUBREAPER): every orphan of a check is re-parented to
	// berth instead of init, and berth kills and reaps them until none is
	// left.
	IsolateSubreaper Isolation = "subreaper"
)

// --- cgroup v2 ---

// cgroupBase is the cgroup v2 directory berth runs in, where checks get
// their cgroups; empty with the reason when there is none berth can use.
var cgroupBase = sync.OnceValues(findCgroupBase)

// findCgroupBase finds the cgroup v2 mount (/sys/fs/cgroup on a unified
// host, /sys/fs/cgroup/unified on a hybrid one) and berth's own cgroup in
// it, and checks that berth is really listed there.
func findCgroupBase() (string, error) {
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	ms, err := mountinfo.Parse(mi)
	mi.Close()
	if err != nil {
		return "", err
	}
	var mnt, mntRoot string
	for _, m := range ms {
		if m.FSType == "cgroup2" {
			mnt, mntRoot = m.Point, m.Root
			break
		}
	}
	if mnt == "" {
		return "", errors.New("no cgroup v2 hierarchy is mounted")
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	var own string
	for line := range strings.SplitSeq(string(self), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			own = p
		}
	}
	if own == "" {
		return "", errors.New("berth is in no cgroup v2")
	}
	rel, ok := strings.CutPrefix(own, strings.TrimSuffix(mntRoot, "/"))
	if !ok || strings.Contains(rel, "..") {
		return "", fmt.Errorf("berth's cgroup %s is outside the mounted hierarchy %s", own, mntRoot)
	}
	base := filepath.Join(mnt, rel)
	procs, err := os.ReadFile(filepath.Join(base, "cgroup.procs"))
	if err != nil {
		return "", err
	}
	me := strconv.Itoa(os.Getpid())
	for p := range strings.FieldsSeq(string(procs)) {
		if p == me {
			return base, nil
		}
	}
	return "", fmt.Errorf("berth is not listed in %s/cgroup.procs", base)
}

// cgroup is the cgroup of one check.
type cgroup struct {
	dir string
	fd  int // an O_PATH descriptor of dir, for CLONE_INTO_CGROUP
	// killFile is "cgroup.kill"; tests give another name to take the path
	// of kernels without it (before 5.14): freeze, then kill every member.
	killFile string
}

// newCgroup creates an empty cgroup for one check under berth's own. It
// fails when the hierarchy is missing or not writable (a container
// without a delegated cgroup, an unprivileged user), or when the kernel
// has neither cgroup.kill (5.14) nor cgroup.freeze (5.2).
func newCgroup(killFile string) (*cgroup, error) {
	base, err := cgroupBase()
	if err != nil {
		return nil, err
	}
	if killFile == "" {
		killFile = "cgroup.kill"
	}
	// A unique name per check, also across berth processes sharing a
	// cgroup (the agent and a node-installer in one pod).
	dir, err := os.MkdirTemp(base, fmt.Sprintf("berth-check-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	cg := &cgroup{dir: dir, fd: -1, killFile: killFile}
	if !cg.has(killFile) && !cg.has("cgroup.freeze") {
		cg.remove()
		return nil, fmt.Errorf("%s has neither cgroup.kill nor cgroup.freeze", dir)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		cg.remove()
		return nil, err
	}
	cg.fd = fd
	return cg, nil
}

func (cg *cgroup) has(file string) bool {
	_, err := os.Stat(filepath.Join(cg.dir, file))
	return err == nil
}

// closeFD releases the descriptor once the check has started.
func (cg *cgroup) closeFD() {
	if cg.fd >= 0 {
		unix.Close(cg.fd)
		cg.fd = -1
	}
}

// populated reads cgroup.events: whether a live process is left in the
// cgroup (zombies do not count).
func (cg *cgroup) populated() (bool, error) {
	b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.events"))
	if err != nil {
		return false, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "populated "); ok {
			return v != "0", nil
		}
	}
	return false, errors.New("cgroup.events has no populated line")
}

// kill kills every process in the cgroup and waits until none is left or
// the deadline passes; it returns the pids that survive.
func (cg *cgroup) kill(deadline time.Time) []int {
	killFile := filepath.Join(cg.dir, cg.killFile)
	useKill := os.WriteFile(killFile, []byte("1"), 0) == nil
	if !useKill {
		// Frozen processes cannot fork; SIGKILL still ends them.
		_ = os.WriteFile(filepath.Join(cg.dir, "cgroup.freeze"), []byte("1"), 0)
	}
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		if !useKill {
			for _, pid := range cg.procs() {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if pop, err := cg.populated(); err != nil || !pop {
			return nil
		}
		if time.Now().After(deadline) {
			return cg.procs()
		}
		time.Sleep(wait)
	}
}

func (cg *cgroup) procs() []int {
	b, err := os.ReadFile(filepath.Join(cg.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for f := range strings.FieldsSeq(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}

// remove deletes the (empty) cgroup; it retries briefly while the kernel
// finishes releasing the last member.
func (cg *cgroup) remove() {
	cg.closeFD()
	for i := 0; i < 50; i++ {
		err := unix.Rmdir(cg.dir)
		if err == nil || errors.Is(err, unix.ENOENT) || !errors.Is(err, unix.EBUSY) {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// --- subreaper ---

// subreaper is set once per process, the first time a check runs without
// a cgroup. It is process-wide state: from then on every orphan of any
// process berth started is re-parented to berth instead of init.
// os/exec is not disturbed by it: berth never waits for "any child", only
// for the pids it knows (exec.Cmd.Wait uses the child's pidfd or pid), and
// the sweep below reaps only orphans of checks, told apart from berth's
// own children by their session (see sweep).
var (
	subreaperOnce sync.Once
	subreaperErr  error
	subreaperOn   atomic.Bool
)

func enableSubreaper() error {
	subreaperOnce.Do(func() {
		subreaperErr = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
		if subreaperErr == nil {
			subreaperOn.Store(true)
		}
	})
	return subreaperErr
}

// leaders are the pids of the checks that are running (started and not
// yet reaped by their exec.Cmd): the sweep must leave them to their Wait.
// Starting a check and scanning for orphans both hold leadersMu, so that
// a check just started is never mistaken for an orphan.
var (
	leadersMu sync.Mutex
	leaders   = map[int]bool{}
	// sweepMu serialises sweeps: a pid is killed and reaped by one sweep
	// only, so it cannot be reused between a scan and a kill.
	sweepMu sync.Mutex
)

// startLeader starts cmd and registers it as a running check.
func startLeader(start func() error, pid func() int) error {
	leadersMu.Lock()
	defer leadersMu.Unlock()
	if err := start(); err != nil {
		return err
	}
	leaders[pid()] = true
	return nil
}

// leaderDone unregisters a check once its exec.Cmd has reaped it, and
// says whether another check is still running.
func leaderDone(pid int) (othersRunning bool) {
	leadersMu.Lock()
	defer leadersMu.Unlock()
	delete(leaders, pid)
	return len(leaders) > 0
}

// sweep kills and reaps, until none is left or the deadline passes, every
// process re-parented to berth as a subreaper that belongs to a check:
// its parent is berth (/proc/<pid>/stat), it is not a running check's
// leader, and it is in another session than berth's. Checks start in a
// session of their own (setsid), and a process can only leave a session
// for a new one of its own, so every process a check starts is in another
// session than berth, while berth's other children (the QEMU probe,
// version commands) stay in berth's. only, when not nil, narrows the
// sweep to orphans in those sessions. Killing an orphan re-parents its
// own children to berth, so the scan repeats until it finds nothing. It
// returns the pids that could not be reaped by the deadline.
func sweep(only func(sid int) bool, deadline time.Time) []int {
	if !subreaperOn.Load() {
		return nil
	}
	sweepMu.Lock()
	defer sweepMu.Unlock()
	me, mySID := os.Getpid(), 0
	if sid, err := unix.Getsid(0); err == nil {
		mySID = sid
	}
	for {
		leadersMu.Lock()
		orphans := childrenOf(me, func(pid, sid int) bool {
			return sid != mySID && !leaders[pid] && (only == nil || only(sid))
		})
		leadersMu.Unlock()
		if len(orphans) == 0 {
			return nil
		}
		for _, pid := range orphans {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		var left []int
		for _, pid := range orphans {
			if !reap(pid, deadline) {
				left = append(left, pid)
			}
		}
		if len(left) > 0 {
			return left
		}
	}
}

// reap waits for pid, a child of berth it has killed, until the deadline.
func reap(pid int, deadline time.Time) bool {
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil || got == pid: // reaped, or not ours any more
			return true
		case time.Now().After(deadline):
			return false
		}
		time.Sleep(wait)
	}
}

// childrenOf lists the processes whose parent is ppid and for which keep
// (given pid and session id) is true, zombies included, from /proc.
func childrenOf(ppid int, keep func(pid, sid int) bool) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var out []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may hold spaces
		// and parentheses, so fields are counted after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 4 {
			continue
		}
		pp, err1 := strconv.Atoi(f[1])
		sid, err2 := strconv.Atoi(f[3])
		if err1 != nil || err2 != nil || pp != ppid {
			continue
		}
		if keep(pid, sid) {
			out = append(out, pid)
		}
	}
	return out
}

// checkSysProcAttr is how a check starts: in a session (and so a process
// group) of its own, in cg when there is one.
func checkSysProcAttr(cg *cgroup) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	if cg != nil {
		a.UseCgroupFD, a.CgroupFD = true, cg.fd
	}
	return a
}

// leadersRunning says whether a check is running.
func leadersRunning() bool {
	leadersMu.Lock()
	defer leadersMu.Unlock()
	return len(leaders) > 0
}
