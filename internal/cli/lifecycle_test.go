package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
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
			w := Wiring{ForceAfter: forceAfter, Commands: []func(*Globals) *cobra.Command{func(g *Globals) *cobra.Command {
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
			}}}
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
// starts after the subscription unless it is early, and an early one
// waits for it where lifecycle.awaitSignals says.
func TestRunGuardedEarlyStart(t *testing.T) {
	for _, early := range []bool{false, true} {
		t.Run(fmt.Sprint("early=", early), func(t *testing.T) {
			s := &signals{ready: make(chan struct{}), stop: make(chan os.Signal, 1), pipe: make(chan os.Signal, 1)}
			l := newLifecycle(context.Background(), time.Second)
			l.subscribed = s.ready
			started, waited := make(chan struct{}), make(chan struct{})
			ret := make(chan error, 1)
			go func() {
				err, _, _ := runGuarded(l, func(error) {}, guard{early: early}, s, true, func() error {
					close(started)
					l.awaitSignals()
					close(waited)
					return nil
				})
				ret <- err
			}()
			select {
			case <-started:
				if !early {
					t.Fatal("the command started before the signals were subscribed")
				}
			case <-time.After(100 * time.Millisecond):
				if early {
					t.Fatal("the early command did not start before the subscription")
				}
			}
			select {
			case <-waited:
				t.Fatal("awaitSignals returned before the subscription")
			case <-time.After(50 * time.Millisecond):
			}
			close(s.ready)
			<-started
			<-waited
			if err := <-ret; err != nil {
				t.Fatal(err)
			}
		})
	}
}
