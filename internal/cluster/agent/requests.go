package agent

import (
	"net/http"

	"k8s.io/client-go/rest"
)

// CountRequests wraps cfg's transport so that count is called with the
// HTTP method of every request sent to the API server: GET and LIST are
// reads, PATCH/PUT/POST/DELETE writes. The agent's metrics and the scale
// tests use it to show that a quiet interval writes nothing.
func CountRequests(cfg *rest.Config, count func(method string)) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			count(r.Method)
			return rt.RoundTrip(r)
		})
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
