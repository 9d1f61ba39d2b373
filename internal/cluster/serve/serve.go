// Package serve runs the small HTTP endpoints of berth's cluster
// processes: the agent's health and metrics, the node-installer's health.
// Both are long-running pods that the kubelet probes, so both need the
// same listen, serve and graceful-stop handling; the errors name the
// address only, and each command adds the flag it came from.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// shutdownGrace bounds how long in-flight requests (a probe, a scrape) may
// take to finish once the context is done.
const shutdownGrace = 5 * time.Second

// HTTP listens on addr and serves h until ctx is done; then it stops
// accepting, lets in-flight requests finish and returns nil.
func HTTP(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	return Listener(ctx, ln, h, log)
}

// Listener serves h on ln until ctx is done, as HTTP does. It takes the
// listener so that a caller (a test) can bind port 0 and know the port.
func Listener(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		shut, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	log.Info("serving health endpoints", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", ln.Addr(), err)
	}
	return nil
}
