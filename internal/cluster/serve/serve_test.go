package serve

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestListenerServesUntilCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	errc := make(chan error, 1)
	go func() { errc <- Listener(ctx, ln, h, slog.New(slog.DiscardHandler)) }()

	resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Fatalf("GET: %d %q", resp.StatusCode, body)
	}

	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("a cancelled server returned %v, want nil", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the server did not stop after its context was cancelled")
	}
	if _, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		t.Error("the address still answers after the server stopped")
	}
}

// TestHTTPErrors: a listen failure names the address and nothing of any
// one command's flags, which the caller adds.
func TestHTTPErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct{ name, addr, want string }{
		{"address in use", busy.Addr().String(), "listening on " + busy.Addr().String()},
		{"not an address", "no-such-port:xyz", "listening on no-such-port:xyz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := HTTP(context.Background(), tc.addr, http.NotFoundHandler(), slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "--") {
				t.Fatalf("HTTP(%q) = %v, want an error containing %q and no flag name", tc.addr, err, tc.want)
			}
		})
	}
}
