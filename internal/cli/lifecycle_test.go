package cli

import (
	"bytes"
	"errors"
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
		deaf      bool
		ret       error
		wantCode  int
		wantFinal bool // the command ran to its end before Run returned
	}{
		{"stops cleanly", false, false, nil, 0, true},
		{"returns an error", false, false, errors.New("discovery cancelled"), ExitTerminated, true},
		{"ignores the signal", false, true, nil, ExitTerminated, false},
		{"owns its signals", true, true, nil, 0, true},
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
				if tc.own {
					c.Annotations = map[string]string{AnnotationOwnSignals: "true"}
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
