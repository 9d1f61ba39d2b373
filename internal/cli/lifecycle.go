package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// Exit codes of a run cut short, as a shell reports a process killed by
// the signal (128 + the signal number); berth exits with them after
// removing what it created.
const (
	ExitInterrupted = 128 + int(syscall.SIGINT)  // 130
	ExitTerminated  = 128 + int(syscall.SIGTERM) // 143
	ExitBrokenPipe  = 128 + int(syscall.SIGPIPE) // 141
)

// defaultForceAfter is how long berth waits, after SIGINT or SIGTERM, for
// the command to return on its own (its context is cancelled) before it
// removes what it created and exits anyway; a second signal does not wait.
// Commands annotated with AnnotationOwnSignals are waited for.
const defaultForceAfter = 10 * time.Second

// AnnotationOwnSignals marks a command (cobra.Command.Annotations) for
// which SIGINT and SIGTERM are its normal way to stop, such as the agent:
// berth waits for it however long it takes, and its own result is the
// exit status. Other commands that return nil after a signal exit 0 too.
const AnnotationOwnSignals = "berth.dev/own-signals"

// AnnotationEarlyStart marks a command that only reads (check, facts) to
// start beside the signal subscription instead of after it: the first
// subscription of a process waits for os/signal's goroutine to start on
// a thread of its own, a few hundred microseconds that the command's
// discovery fills. Until the subscription is made, SIGINT or SIGTERM end
// the command as they end any process, which for a read is what the user
// asked. What must not be cut short waits for it: creating anything to
// clean up (lifecycle.begin: the unpacking of a snapshot root) and
// writing the command's result (Globals.awaitSignals), so that a closed
// stdout still ends the run with its cleanups and exit code 141.
const AnnotationEarlyStart = "berth.dev/early-start"

// errInterrupted is what a command gets when it opens a root after berth
// was told to stop.
var errInterrupted = errors.New("interrupted")

// signalCause is the cause of the command context's cancellation.
type signalCause struct{ sig syscall.Signal }

func (c signalCause) Error() string { return "received " + c.sig.String() }

// lifecycle holds what a run must undo however it ends: the unpacked
// snapshots of OpenRoot, the temporary archive of snapshot. Commands
// defer the cleanups they get as usual; Run also calls them all when a
// signal cuts the run short, and a cleanup runs only once.
type lifecycle struct {
	ctx context.Context
	// subscribed is closed once the run's signals are subscribed (nil:
	// nothing to wait for).
	subscribed <-chan struct{}
	forceAfter time.Duration // see defaultForceAfter
	mu         sync.Mutex
	idle       *sync.Cond // signalled when opening drops to 0
	opening    int        // roots being opened: their cleanup is not known yet
	closed     bool
	cleanups   []func()
}

func newLifecycle(ctx context.Context, forceAfter time.Duration) *lifecycle {
	if forceAfter <= 0 {
		forceAfter = defaultForceAfter
	}
	l := &lifecycle{ctx: ctx, forceAfter: forceAfter}
	l.idle = sync.NewCond(&l.mu)
	return l
}

// context is the run's context (cancelled by SIGINT and SIGTERM).
func (l *lifecycle) context() context.Context {
	if l == nil {
		return context.Background()
	}
	return l.ctx
}

// begin announces that something that needs cleaning up is being created;
// false when the run is already being torn down.
func (l *lifecycle) begin() bool {
	if l == nil {
		return true
	}
	l.awaitSignals()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.opening++
	return true
}

// awaitSignals returns once the run's signals are subscribed (at once
// for a command that is not AnnotationEarlyStart: it starts after).
func (l *lifecycle) awaitSignals() {
	if l != nil && l.subscribed != nil {
		<-l.subscribed
	}
}

// end registers the cleanup of what begin announced and returns it, made
// safe to call more than once.
func (l *lifecycle) end(cleanup func()) func() {
	if l == nil {
		return cleanup
	}
	once := sync.OnceFunc(cleanup)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opening--
	l.cleanups = append(l.cleanups, once)
	if l.opening == 0 {
		l.idle.Broadcast()
	}
	return once
}

// add registers a cleanup at once (begin and end).
func (l *lifecycle) add(cleanup func()) func() {
	if !l.begin() {
		cleanup()
		return func() {}
	}
	return l.end(cleanup)
}

// closeAll waits until nothing is being opened, refuses new openings and
// runs every cleanup (each only once).
func (l *lifecycle) closeAll() {
	if l == nil {
		return
	}
	l.mu.Lock()
	for l.opening > 0 {
		l.idle.Wait()
	}
	l.closed = true
	cs := l.cleanups
	l.cleanups = nil
	l.mu.Unlock()
	for _, c := range cs {
		c()
	}
}

// runGuarded runs execute under a context that SIGINT and SIGTERM cancel,
// with SIGPIPE turned into EPIPE write errors, and returns its error, the
// signal received (0 for none) and whether berth stopped waiting for the
// command. The cleanups of l have all run when it returns.
//
//   - SIGINT/SIGTERM cancel the context; the command returns (its deferred
//     cleanups run). A command that does not return within l.forceAfter
//     (unless ownSignals), or a second signal, is not waited for: the
//     registered cleanups run (after any root being unpacked is complete)
//     and berth exits.
//   - Go kills a program that writes to a closed stdout or stderr pipe
//     with SIGPIPE, before any deferred cleanup. Notifying SIGPIPE makes
//     such a write fail with EPIPE instead, which the command returns like
//     any write error.
//
// The subscription s is made before (subscribe) and, unless keep is set,
// given up when the command has returned. The command starts once it is
// made, or at once when it is early (AnnotationEarlyStart).
func runGuarded(l *lifecycle, cancel context.CancelCauseFunc, c guard, s *signals, keep bool, execute func() error) (err error, sig syscall.Signal, forced bool) {
	done := make(chan error, 1)
	if c.early {
		go func() { done <- execute() }()
	}
	<-s.ready
	if !keep {
		defer s.unsubscribe()
	}
	sigs := s.stop
	defer l.closeAll()

	if !c.early {
		go func() { done <- execute() }()
	}
	select {
	case err := <-done:
		return err, 0, false
	case s := <-sigs:
		sig = s.(syscall.Signal)
	}
	cancel(signalCause{sig})
	var timeout <-chan time.Time
	if !c.ownSignals {
		timer := time.NewTimer(l.forceAfter)
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case err := <-done:
		return err, sig, false
	case <-sigs:
	case <-timeout:
	}
	return nil, sig, true
}

// guard is how runGuarded treats a command: from its annotations
// (AnnotationOwnSignals, AnnotationEarlyStart).
type guard struct{ ownSignals, early bool }

// isBrokenPipe says whether err is a write to a closed pipe (or socket).
func isBrokenPipe(err error) bool {
	return errors.Is(err, syscall.EPIPE)
}

// signals is a run's subscription to SIGINT and SIGTERM (stop) and SIGPIPE
// (pipe, only so that a write to a closed pipe fails with EPIPE).
type signals struct {
	ready chan struct{} // closed once both are subscribed
	stop  chan os.Signal
	pipe  chan os.Signal
}

// subscribe subscribes in the background. The first signal.Notify of a
// process starts os/signal's receiving goroutine, which parks a thread of
// its own: done beside the construction of the command tree rather than
// before it, that start costs a command's start-up nothing (it was about
// a tenth of `berth version`). runGuarded waits for it before the command
// runs, so that no signal can find the command unsubscribed, unless the
// command is AnnotationEarlyStart.
func subscribe() *signals {
	s := &signals{ready: make(chan struct{}), stop: make(chan os.Signal, 2), pipe: make(chan os.Signal, 1)}
	go func() {
		signal.Notify(s.stop, syscall.SIGINT, syscall.SIGTERM)
		signal.Notify(s.pipe, syscall.SIGPIPE)
		close(s.ready)
	}()
	return s
}

// unsubscribe restores the signals' default handling (tests run many
// commands in one process). signal.Stop waits until os/signal's goroutine
// is idle, which a process that exits next need not wait for
// (Wiring.Exits).
func (s *signals) unsubscribe() {
	<-s.ready
	signal.Stop(s.stop)
	signal.Stop(s.pipe)
}
