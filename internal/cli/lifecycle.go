package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
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

// AnnotationEarlyStart marks a command that only reads and prints
// (check, facts, version) to start without subscribing to signals, and to
// subscribe only once it has something to undo or hands the run on: the
// first subscription of a process starts os/signal's goroutine on a
// thread of its own, and each signal subscribed is a round trip with that
// thread, 0.5-0.8 ms of a 5-20 ms command on a two-core VM. Until then
// SIGINT, SIGTERM or a closed stdout (SIGPIPE) end the command as they end
// any process, which for a read is what the user asked; a shell reports
// the same 130, 143 or 141. What subscribes first (lifecycle.needSignals):
// creating anything to clean up (lifecycle.begin: the unpacking of a
// snapshot root), handing the run to berth-cluster, running host
// plug-ins. The processes berth starts for a read (the QEMU probe, a
// binary's --version) die with it (their parent-death signal).
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
	// sigs is the run's subscription (nil: none, in tests).
	sigs       *signals
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
	l.needSignals()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.opening++
	return true
}

// isClosed reports whether the run is being torn down (closeAll).
func (l *lifecycle) isClosed() bool {
	if l == nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// needSignals subscribes the run's signals unless that is done, and
// returns once they are: before berth creates what it must undo, or hands
// the run to another program, so that no signal finds it unsubscribed.
func (l *lifecycle) needSignals() {
	if l != nil && l.sigs != nil {
		l.sigs.start()
		<-l.sigs.ready
	}
}

// awaitSignals returns once a subscription already started is made (at
// once when none was): a command writes its result after it, so that a
// closed stdout ends a run with cleanups with 141 after them. A run that
// started none has nothing to undo, and SIGPIPE ends it as it ends any
// process.
func (l *lifecycle) awaitSignals() {
	if l != nil && l.sigs != nil && l.sigs.started.Load() {
		<-l.sigs.ready
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
// The command starts once the subscription s is made, or at once when it
// is early (AnnotationEarlyStart), which subscribes when it needs to
// (lifecycle.needSignals) or never. Unless keep is set, a subscription is
// given up when the command has returned.
func runGuarded(l *lifecycle, cancel context.CancelCauseFunc, c guard, s *signals, keep bool, execute func() error) (err error, sig syscall.Signal, forced bool) {
	done := make(chan error, 1)
	if !c.early {
		s.start()
		<-s.ready
	}
	if !keep {
		defer s.unsubscribe()
	}
	sigs := s.stop
	defer l.closeAll()

	go func() { done <- execute() }()
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
// (pipe, only so that a write to a closed pipe fails with EPIPE), made by
// start.
type signals struct {
	once    sync.Once
	started atomic.Bool
	ready   chan struct{} // closed once both are subscribed
	stop    chan os.Signal
	pipe    chan os.Signal
	// notify subscribes (signal.Notify; tests hold it back).
	notify func(s *signals)
}

func newSignals() *signals {
	return &signals{ready: make(chan struct{}), stop: make(chan os.Signal, 2), pipe: make(chan os.Signal, 1), notify: notifySignals}
}

func notifySignals(s *signals) {
	signal.Notify(s.stop, syscall.SIGINT, syscall.SIGTERM)
	signal.Notify(s.pipe, syscall.SIGPIPE)
}

// start subscribes in the background, once; ready is closed when it is
// done. The first signal.Notify of a process starts os/signal's
// receiving goroutine, which parks a thread of its own, and each signal
// enabled waits for that thread.
func (s *signals) start() {
	s.once.Do(func() {
		s.started.Store(true)
		go func() {
			s.notify(s)
			close(s.ready)
		}()
	})
}

// unsubscribe restores the signals' default handling (tests run many
// commands in one process). signal.Stop waits until os/signal's goroutine
// is idle, which a process that exits next need not wait for
// (Wiring.Exits).
func (s *signals) unsubscribe() {
	if !s.started.Load() {
		return
	}
	<-s.ready
	signal.Stop(s.stop)
	signal.Stop(s.pipe)
}
