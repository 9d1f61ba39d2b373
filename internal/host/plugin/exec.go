package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"

	"golang.org/x/sys/unix"
)

// ChecksDir is where host owners put executable checks, relative to the
// root.
const ChecksDir = "etc/berth/checks.d"

// Defaults for RunChecks.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultMaxOutput = 1 << 20
	DefaultParallel  = 4
)

// maxStderrKept is how much of a check's stderr is quoted in its error.
const maxStderrKept = 512

// checkEnv is the whole environment of a check: nothing of berth's own
// environment (proxies, tokens, kubeconfig paths) leaks into it.
var checkEnv = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C"}

// Options bound how executable checks run. Zero values mean the defaults.
type Options struct {
	// Timeout bounds each check, from start until its process group is
	// gone.
	Timeout time.Duration
	// MaxOutput caps stdout and stderr, each; beyond it the check is
	// killed.
	MaxOutput int
	// Parallel is how many checks run at once.
	Parallel int
	// Isolation says how the processes of a check are contained: a
	// cgroup when one can be made (the default), or the subreaper.
	Isolation Isolation

	// cgroupKillFile replaces cgroup.kill in tests (see cgroup.killFile).
	cgroupKillFile string
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = DefaultMaxOutput
	}
	if o.Parallel <= 0 {
		o.Parallel = DefaultParallel
	}
	return o
}

// Result is the outcome of one executable check.
type Result struct {
	// Name is the file name in the checks directory.
	Name string
	// Output holds the valid facts and findings; empty when Err says the
	// check failed as a whole.
	Output Output
	// Err says why the check, or part of its output, could not be used.
	Err error
	// PGID is the process group (and session) the check ran in (0 when
	// it was not started); no process of it is left when RunChecks
	// returns.
	PGID int
	// Isolation is how its processes were contained: IsolateCgroup or
	// IsolateSubreaper ("" when it was not started).
	Isolation Isolation
	Duration  time.Duration
}

// RunChecks runs every executable check in dir (an absolute path on this
// machine) and returns one result per file, in lexical order. It refuses
// the whole directory unless it is owned by root or the invoking user and
// not group- or world-writable, and every parent (of the path as given and
// as resolved) is as safe or sticky; it refuses a file that is not such a
// regular executable or that is a symlink leading out of the directory.
// Each check runs with a minimal environment, stdin on /dev/null, in its own
// session and process group, with a timeout and an output cap. Every
// process it starts, double forks into a new session included, is killed
// at the deadline, when the output overflows, and after the check exits:
// the check runs in a cgroup of its own that is killed whole, or, where no
// cgroup can be made, berth is a child subreaper that kills and reaps every
// orphan the check leaves (see Isolation). A missing dir yields no results
// and no error.
func RunChecks(ctx context.Context, dir string, opt Options) ([]Result, error) {
	opt = opt.withDefaults()
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checks directory %s: %w", dir, err)
	}
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("checks directory %s: %w", dir, err)
	}
	st, err := os.Stat(realDir)
	if err != nil {
		return nil, fmt.Errorf("checks directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("checks directory %s: not a directory", dir)
	}
	if err := safeOwner(st); err != nil {
		return nil, fmt.Errorf("refusing to run any check from %s: %s %w", dir, realDir, err)
	}
	// Whoever can write to a parent can swap the directory (or a symlink
	// to it) for one of their choosing: the path as given and the path it
	// resolves to must both be safe all the way up.
	for _, p := range []string{filepath.Dir(dir), filepath.Dir(realDir)} {
		if err := safeAncestors(p); err != nil {
			return nil, fmt.Errorf("refusing to run any check from %s: %w", dir, err)
		}
	}
	ents, err := os.ReadDir(realDir)
	if err != nil {
		return nil, fmt.Errorf("checks directory %s: %w", dir, err)
	}

	var results []Result
	for _, e := range ents {
		if n := e.Name(); !strings.HasPrefix(n, ".") && !strings.HasSuffix(n, "~") {
			results = append(results, Result{Name: n})
		}
	}
	sem := make(chan struct{}, opt.Parallel)
	var wg sync.WaitGroup
	for i := range results {
		r := &results[i]
		exe, err := vet(realDir, r.Name)
		if err != nil {
			r.Err = err
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := ctx.Err(); err != nil {
				r.Err = fmt.Errorf("not run: %w", err)
				return
			}
			start := time.Now()
			run(ctx, exe, opt, r)
			r.Duration = time.Since(start)
		}()
	}
	wg.Wait()
	// Orphans a check left while others ran are killed by now (unless
	// another RunChecks is running: its last check sweeps them).
	if !leadersRunning() {
		sweep(nil, time.Now().Add(killGrace))
	}
	return results, nil
}

// killGrace bounds the wait for killed processes to be gone.
const killGrace = 2 * time.Second

// vet checks that name in dir may be run and returns the path to execute.
func vet(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", fmt.Errorf("unsafe: symlink %s: %w", p, err)
		}
		if filepath.Dir(t) != dir {
			return "", fmt.Errorf("unsafe: symlink %s leaves the directory (-> %s)", p, t)
		}
		if fi, err = os.Stat(t); err != nil {
			return "", err
		}
		p = t
	}
	switch {
	case !fi.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file (%s)", p, fi.Mode().Type())
	case fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%s is not executable (mode %s)", p, fi.Mode().Perm())
	}
	if err := safeOwner(fi); err != nil {
		return "", fmt.Errorf("unsafe: %s %w", p, err)
	}
	return p, nil
}

// safeOwner accepts files owned by root or the invoking user that nobody
// else can write: only they could have put the code there.
func safeOwner(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("has no owner information")
	}
	if uid := int(st.Uid); uid != 0 && uid != os.Getuid() && uid != os.Geteuid() {
		return fmt.Errorf("is owned by uid %d, expected root or uid %d", uid, os.Getuid())
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("is group- or world-writable (mode %s)", fi.Mode().Perm())
	}
	return nil
}

// safeAncestors checks p and each of its parents up to "/": each must be
// owned by root or the invoking user and not writable by others, except
// for sticky directories such as /tmp, where others cannot rename or
// remove what they do not own. A symlink on the way must be owned by root
// or the invoking user (its target is checked as the resolved path).
func safeAncestors(p string) error {
	for {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			if err := safeOwner(symlinkInfo{fi}); err != nil {
				return fmt.Errorf("symlink %s %w", p, err)
			}
		case fi.Mode()&fs.ModeSticky != 0:
			if err := safeOwner(stickyInfo{fi}); err != nil {
				return fmt.Errorf("%s %w", p, err)
			}
		default:
			if err := safeOwner(fi); err != nil {
				return fmt.Errorf("%s %w", p, err)
			}
		}
		if p == "/" || p == "." {
			return nil
		}
		p = filepath.Dir(p)
	}
}

// symlinkInfo and stickyInfo hide permission bits that do not matter for
// safeOwner: a symlink's are always 0777, and a sticky directory's write
// bits do not let others replace entries they do not own.
type (
	symlinkInfo struct{ fs.FileInfo }
	stickyInfo  struct{ fs.FileInfo }
)

func (symlinkInfo) Mode() fs.FileMode  { return fs.ModeSymlink }
func (s stickyInfo) Mode() fs.FileMode { return s.FileInfo.Mode() &^ 0o022 }

// run executes one check and fills r.
func run(ctx context.Context, exe string, opt Options, r *Result) {
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	outR, outW, err := os.Pipe()
	if err != nil {
		r.Err = err
		return
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		r.Err = err
		return
	}
	iso := opt.Isolation
	var cg *cgroup
	if iso != IsolateSubreaper {
		if cg, err = newCgroup(opt.cgroupKillFile); err != nil {
			cg = nil
		}
	}
	newCmd := func() *exec.Cmd {
		return &exec.Cmd{
			Path:        exe,
			Args:        []string{exe},
			Env:         checkEnv,
			Dir:         "/",
			Stdout:      outW,
			Stderr:      errW,
			SysProcAttr: checkSysProcAttr(cg),
		}
	}
	cmd := newCmd()
	if cg == nil {
		err = enableSubreaper()
	}
	if err == nil {
		err = startLeader(cmd.Start, func() int { return cmd.Process.Pid })
	}
	if err != nil && cg != nil {
		// The kernel refused the cgroup (no clone3 or CLONE_INTO_CGROUP,
		// a cgroup that cannot take processes): run with the subreaper.
		cg.remove()
		cg = nil
		if err = enableSubreaper(); err == nil {
			cmd = newCmd()
			err = startLeader(cmd.Start, func() int { return cmd.Process.Pid })
		}
	}
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if cg != nil {
			cg.remove()
		}
		r.Err = fmt.Errorf("starting: %w", err)
		return
	}
	r.Isolation = IsolateSubreaper
	if cg != nil {
		cg.closeFD()
		r.Isolation = IsolateCgroup
	}
	pid := cmd.Process.Pid
	r.PGID = pid
	overflow := make(chan string, 2)
	stdout := capture(outR, opt.MaxOutput, opt.MaxOutput, "stdout", overflow)
	stderr := capture(errR, maxStderrKept, opt.MaxOutput, "stderr", overflow)

	// Wait for the exit without reaping, so that the group id cannot be
	// reused before the group is killed.
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var info unix.Siginfo
		for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
		}
	}()
	var failure error
	select {
	case <-exited:
	case <-ctx.Done():
		failure = fmt.Errorf("timed out after %s", opt.Timeout)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			failure = ctx.Err()
		}
	case which := <-overflow:
		failure = fmt.Errorf("%s exceeds %d bytes: killed", which, opt.MaxOutput)
	}
	// What the check started outlives it when it forked: kill it all in
	// every case. The process group holds its plain children; the cgroup,
	// or the subreaper's sweep, also those that left the group or the
	// session.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	deadline := time.Now().Add(killGrace)
	var left []int
	if cg != nil {
		left = cg.kill(deadline)
	}
	<-exited
	_ = cmd.Wait()
	othersRunning := leaderDone(pid)
	// The check's own session first, every orphan when no other check
	// runs (a new session cannot be told apart from another check's).
	left = append(left, sweep(func(sid int) bool { return sid == pid }, deadline)...)
	if !othersRunning {
		left = append(left, sweep(nil, deadline)...)
	}
	if cg != nil {
		cg.remove()
	}
	// The pipes close when the last writer dies; a child that left the
	// group could hold them open, so the wait is bounded by the deadline.
	for _, c := range []*captured{stdout, stderr} {
		select {
		case <-c.done:
		case <-ctx.Done():
			c.r.Close()
			<-c.done
		}
	}
	if failure == nil {
		select {
		case which := <-overflow:
			failure = fmt.Errorf("%s exceeds %d bytes: killed", which, opt.MaxOutput)
		default:
		}
	}
	if failure == nil && len(left) > 0 {
		failure = fmt.Errorf("processes %v it started could not be killed", left)
	}
	switch st := cmd.ProcessState; {
	case failure != nil:
		r.Err = failure
	case !st.Success():
		r.Err = fmt.Errorf("%s%s", describeState(st), quoteStderr(stderr.data))
	default:
		r.Output, r.Err = ParseOutput(stdout.data)
	}
}

// captured is one output stream being read.
type captured struct {
	r    *os.File
	data []byte
	done chan struct{}
}

// capture reads r in the background, keeping the first keep bytes; beyond
// limit it reports name on overflow and stops reading.
func capture(r *os.File, keep, limit int, name string, overflow chan<- string) *captured {
	c := &captured{r: r, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer r.Close()
		buf := make([]byte, 32<<10)
		total := 0
		for {
			n, err := r.Read(buf)
			total += n
			if room := keep - len(c.data); room > 0 {
				c.data = append(c.data, buf[:min(n, room)]...)
			}
			if total > limit {
				overflow <- name
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

func describeState(st *os.ProcessState) string {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("killed by signal %s", ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", st.ExitCode())
}

// quoteStderr makes the start of stderr safe to show on one line.
func quoteStderr(b []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
	if s == "" {
		return ""
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return ": " + s
}
