package testnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Supervisor runs one daemon the way a service manager does for a unit:
// it starts it, reports whether it is active, and stops or restarts it on
// request, waiting until the daemon is ready again. One goroutine owns the
// process; Start, Stop and Restart are requests to it, so they never race
// with each other or with the daemon exiting on its own. The daemon's
// output of every run is kept (its tail) for failure messages.
//
// A restart signals only the daemon's own process: what it started in
// process groups of their own (containerd's shims, and through them the
// pods) keeps running, as with systemd's KillMode=process in containerd's
// unit.
type Supervisor struct {
	name  string
	argv  []string
	ready func(context.Context) error
	log   *tailBuffer
	reqs  chan request
	quit  chan struct{}

	mu     sync.Mutex // guards the fields below, read by the accessors
	pid    int
	starts int
	last   error // how the last run ended, nil while running or never run
}

// StopTimeout is how long Stop and Restart wait for the daemon to exit
// after SIGTERM before they kill it.
const StopTimeout = 15 * time.Second

type op int

const (
	opStart op = iota
	opStop
	opRestart
)

type request struct {
	op    op
	ctx   context.Context
	reply chan error
}

// run is one run of the daemon.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once reaped; err is then its exit
	err  error
}

// NewSupervisor returns a supervisor for argv (not started). ready, polled
// after every start until it returns nil, says when the daemon serves.
func NewSupervisor(name string, argv []string, ready func(context.Context) error) *Supervisor {
	s := &Supervisor{
		name:  name,
		argv:  argv,
		ready: ready,
		log:   &tailBuffer{max: 1 << 20},
		reqs:  make(chan request),
		quit:  make(chan struct{}),
	}
	go s.loop()
	return s
}

// Start starts the daemon and waits until it is ready; it does nothing if
// the daemon runs.
func (s *Supervisor) Start(ctx context.Context) error { return s.do(ctx, opStart) }

// Stop stops the daemon (SIGTERM, SIGKILL after StopTimeout); it does
// nothing if the daemon is not running.
func (s *Supervisor) Stop(ctx context.Context) error { return s.do(ctx, opStop) }

// Restart stops the daemon if it runs, starts it again and waits until it
// is ready: the entry point a service manager's restart maps to.
func (s *Supervisor) Restart(ctx context.Context) error { return s.do(ctx, opRestart) }

// Close stops the daemon and ends the supervisor; later requests fail.
func (s *Supervisor) Close() error {
	err := s.do(context.Background(), opStop)
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	return err
}

// Active reports whether the daemon is running.
func (s *Supervisor) Active() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid != 0
}

// PID is the running daemon's process id, 0 when it is not running.
func (s *Supervisor) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Starts counts the daemon's starts so far.
func (s *Supervisor) Starts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// LastExit is how the daemon's last run ended (nil if it runs or never ran
// or exited with status 0).
func (s *Supervisor) LastExit() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Log is the tail of what the daemon wrote over all its runs, each run
// headed by a line naming it.
func (s *Supervisor) Log() string { return s.log.String() }

func (s *Supervisor) do(ctx context.Context, o op) error {
	r := request{op: o, ctx: ctx, reply: make(chan error, 1)}
	select {
	case s.reqs <- r:
	case <-s.quit:
		return fmt.Errorf("%s: supervisor closed", s.name)
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-r.reply
}

// loop owns the daemon's process.
func (s *Supervisor) loop() {
	var cur *run
	for {
		var exited chan struct{}
		if cur != nil {
			exited = cur.done
		}
		select {
		case <-s.quit:
			return
		case <-exited:
			// The daemon died on its own: record it and wait to be asked.
			s.ended(cur)
			cur = nil
		case r := <-s.reqs:
			var err error
			switch r.op {
			case opStart:
				if cur == nil {
					cur, err = s.start(r.ctx)
				}
			case opStop:
				if cur != nil {
					s.stop(cur)
					cur = nil
				}
			case opRestart:
				if cur != nil {
					s.stop(cur)
				}
				cur, err = s.start(r.ctx)
			}
			r.reply <- err
		}
	}
}

func (s *Supervisor) start(ctx context.Context) (*run, error) {
	s.mu.Lock()
	s.starts++
	n := s.starts
	s.mu.Unlock()
	fmt.Fprintf(s.log, "=== %s: start #%d at %s\n", s.name, n, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	// Its own process group, so a ^C to the test reaches it only through
	// the test's clean-up; Pdeathsig so that a test binary that dies
	// before its clean-up does not leave it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", s.name, err)
	}
	cur := &run{cmd: cmd, done: make(chan struct{})}
	go func() {
		cur.err = cmd.Wait()
		close(cur.done)
	}()
	s.mu.Lock()
	s.pid, s.last = cmd.Process.Pid, nil
	s.mu.Unlock()
	var lastErr error
	for {
		if lastErr = s.ready(ctx); lastErr == nil {
			return cur, nil
		}
		select {
		case <-cur.done:
			s.ended(cur)
			return nil, fmt.Errorf("%s exited before it was ready: %v (last check: %v)", s.name, cur.err, lastErr)
		case <-ctx.Done():
			s.stop(cur)
			return nil, fmt.Errorf("%s not ready: %w (last check: %v)", s.name, ctx.Err(), lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends a run: SIGTERM, then SIGKILL after StopTimeout.
func (s *Supervisor) stop(cur *run) {
	_ = cur.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-cur.done:
	case <-time.After(StopTimeout):
		_ = cur.cmd.Process.Kill()
		<-cur.done
	}
	s.ended(cur)
}

func (s *Supervisor) ended(cur *run) {
	fmt.Fprintf(s.log, "=== %s: exited: %v\n", s.name, cur.err)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pid = 0
	var ee *exec.ExitError
	if cur.err != nil && !(errors.As(cur.err, &ee) && isTermination(ee)) {
		s.last = cur.err
	} else {
		s.last = nil
	}
}

// isTermination tells whether the process ended because it was asked to
// (SIGTERM or SIGKILL from stop), which is not a failure.
func isTermination(ee *exec.ExitError) bool {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGKILL)
}

// tailBuffer keeps the last max bytes written to it, and copies them to
// tee if set.
type tailBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	max int
	tee io.Writer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tee != nil {
		_, _ = t.tee.Write(p)
	}
	t.b.Write(p)
	if over := t.b.Len() - t.max; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
