package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestRunSignalOutcomes signals berth in process (the command signals its
// own process while Run has the signals) and checks the exit status and
// the cleanups of each way a command can react: stop cleanly (0), return
// an error (143, quietly), ignore the signal (forced after forceAfter,
// 143, with the registered cleanups run), or own its signals (waited for).
func TestRunSignalOutcomes(t *testing.T) {
	const forceAfter = 300 * time.Millisecond
	hold := 2 * forceAfter // a deaf command outlives Run
	for _, tc := range []struct {
		name      string
		own       bool
		early     bool
		deaf      bool
		ret       error
		wantCode  int
		wantFinal bool // the command ran to its end before Run returned
	}{
		{"stops cleanly", false, false, false, nil, 0, true},
		{"returns an error", false, false, false, errors.New("discovery cancelled"), ExitTerminated, true},
		{"ignores the signal", false, false, true, nil, ExitTerminated, false},
		{"owns its signals", true, false, true, nil, 0, true},
		// Registering the cleanup waits for the subscription, so that the
		// signal sent next is caught as for any command.
		{"early start returns an error", false, true, false, errors.New("discovery cancelled"), ExitTerminated, true},
		{"early start ignores the signal", false, true, true, nil, ExitTerminated, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var finished, cleaned atomic.Bool
			w := Wiring{ForceAfter: forceAfter, Commands: []Command{{Name: "hold", New: func(g *Globals) *cobra.Command {
				c := &cobra.Command{Use: "hold", RunE: func(cmd *cobra.Command, _ []string) error {
					g.life.add(func() { cleaned.Store(true) })
					syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
					<-cmd.Context().Done()
					if tc.deaf {
						time.Sleep(hold)
					}
					finished.Store(true)
					return tc.ret
				}}
				c.Annotations = map[string]string{}
				if tc.own {
					c.Annotations[AnnotationOwnSignals] = "true"
				}
				if tc.early {
					c.Annotations[AnnotationEarlyStart] = "true"
				}
				return c
			}}}}
			var out, errb bytes.Buffer
			code := Run([]string{"hold"}, strings.NewReader(""), &out, &errb, func(string) string { return "" }, w)
			if code != tc.wantCode || finished.Load() != tc.wantFinal || !cleaned.Load() || errb.Len() > 0 {
				t.Errorf("exit %d (want %d), finished %v (want %v), cleaned %v, stderr %q",
					code, tc.wantCode, finished.Load(), tc.wantFinal, cleaned.Load(), errb.String())
			}
		})
	}
}

// TestRunGuardedEarlyStart holds the order runGuarded keeps: a command
// starts after the subscription unless it is early; an early one never
// subscribes unless it needs to (lifecycle.needSignals), and then waits
// for the subscription, while awaitSignals waits only for one started.
func TestRunGuardedEarlyStart(t *testing.T) {
	for _, tc := range []struct {
		early, needs bool
	}{{false, false}, {true, false}, {true, true}} {
		t.Run(fmt.Sprintf("early=%v needs=%v", tc.early, tc.needs), func(t *testing.T) {
			s := newSignals()
			release := make(chan struct{})
			notified := make(chan struct{})
			s.notify = func(*signals) { close(notified); <-release }
			l := newLifecycle(context.Background(), time.Second)
			l.sigs = s
			started, waited := make(chan struct{}), make(chan struct{})
			ret := make(chan error, 1)
			go func() {
				err, _, _ := runGuarded(l, func(error) {}, guard{early: tc.early}, s, true, func() error {
					close(started)
					if tc.needs {
						l.needSignals()
					} else {
						l.awaitSignals()
					}
					close(waited)
					return nil
				})
				ret <- err
			}()
			// What must happen gets a minute, however loaded the machine;
			// what must not gets a short look.
			if tc.early {
				if !within(started, time.Minute) {
					t.Fatal("the early command did not start before the subscription")
				}
			} else if within(started, 100*time.Millisecond) {
				t.Fatal("the command started before the signals were subscribed")
			}
			subscribing := tc.needs || !tc.early
			if !subscribing {
				if !within(waited, time.Minute) {
					t.Fatal("awaitSignals waited for a subscription nobody started")
				}
			} else if within(waited, 50*time.Millisecond) {
				t.Fatal("the command went on before the subscription was made")
			}
			close(release)
			<-started
			<-waited
			if err := <-ret; err != nil {
				t.Fatal(err)
			}
			select {
			case <-notified:
				if !subscribing {
					t.Error("an early command that needed no signals subscribed")
				}
			default:
				if subscribing {
					t.Error("no subscription was made")
				}
			}
		})
	}
}

// TestRunEarlyCommandsDoNotSubscribe runs the read-only commands through
// Run on a fixture host: none subscribes to a signal (os/signal's
// receiving thread costs each a large share of its run), while a command
// that is not early does.
func TestRunEarlyCommandsDoNotSubscribe(t *testing.T) {
	root := fixtureRoot
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"version"}, false},
		{[]string{"facts", "--root", root, "-o", "json"}, false},
		{[]string{"check", "--root", root, "--no-probe"}, false},
		{[]string{"platforms"}, true},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			var subscribed atomic.Bool
			w := Wiring{notify: func(s *signals) { subscribed.Store(true); notifySignals(s) }}
			var out, errb bytes.Buffer
			code := Run(tc.args, strings.NewReader(""), &out, &errb, func(string) string { return "" }, w)
			if code != ExitOK && code != 1 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			if subscribed.Load() != tc.want {
				t.Errorf("subscribed to signals: %v, want %v", subscribed.Load(), tc.want)
			}
		})
	}
}

// within reports whether ch is closed before d has passed.
func within(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}
