package netprobe

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"berth.dev/berth/internal/host/facts"
)

// refusedURL returns the URL of a local port nobody listens on: one a
// listener had a moment ago.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/v2/"
}

func TestProbe(t *testing.T) {
	status := func(code int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) })
	}
	release := make(chan struct{})
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := map[string]*httptest.Server{
		"ok":       httptest.NewServer(status(http.StatusOK)),
		"401":      httptest.NewServer(status(http.StatusUnauthorized)),
		"503":      httptest.NewServer(status(http.StatusServiceUnavailable)),
		"redirect": httptest.NewServer(http.RedirectHandler("http://192.0.2.1/elsewhere", http.StatusTemporaryRedirect)),
		"hang":     httptest.NewServer(hang),
		"tls":      httptest.NewTLSServer(status(http.StatusNotFound)),
	}
	t.Cleanup(func() {
		close(release)
		for _, s := range srv {
			s.Close()
		}
	})
	tests := []struct {
		name string
		url  string
		want facts.Endpoint
	}{
		{"200", srv["ok"].URL + "/v2/", facts.Endpoint{Reachable: true, HTTPStatus: 200}},
		{"401 is a registry answering anonymous clients", srv["401"].URL + "/v2/", facts.Endpoint{Reachable: true, HTTPStatus: 401}},
		{"503 is reachable, the check judges it", srv["503"].URL, facts.Endpoint{Reachable: true, HTTPStatus: 503}},
		{"redirects are not followed", srv["redirect"].URL, facts.Endpoint{Reachable: true, HTTPStatus: 307}},
		{"timeout", srv["hang"].URL, facts.Endpoint{Failure: "timeout"}},
		{"refused", refusedURL(t), facts.Endpoint{Failure: "refused"}},
		{"self-signed certificate", srv["tls"].URL, facts.Endpoint{Reachable: true, CertUntrusted: true}},
		{"bad URL", "http://[::1", facts.Endpoint{Failure: "error"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Only the hanging server should meet the timeout. The others
			// get a bound a loaded CI machine cannot reach: a TLS handshake
			// there once took longer than 200 ms and read as a timeout.
			timeout := time.Minute
			if tt.want.Failure == "timeout" {
				timeout = 200 * time.Millisecond
			}
			p := Prober{Client: NewClient(), Timeout: timeout}
			got := p.Probe(context.Background(), Target{Role: RoleRegistry, URL: tt.url})
			want := tt.want
			want.Role, want.URL = RoleRegistry, tt.url
			if (want.Failure != "" || want.CertUntrusted) != (got.Error != "") {
				t.Errorf("error = %q", got.Error)
			}
			got.Error = ""
			if got != want {
				t.Errorf("Probe = %+v, want %+v", got, want)
			}
		})
	}
}

func TestProbeAllKeepsOrder(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer srv.Close()
	targets := []Target{{RoleRegistry, refusedURL(t)}, {RoleAttestation, srv.URL}}
	got := Prober{Client: srv.Client(), Timeout: time.Minute}.ProbeAll(context.Background(), targets)
	if len(got) != 2 || got[0].Role != RoleRegistry || got[0].Failure != "refused" || got[1].Role != RoleAttestation || got[1].HTTPStatus != http.StatusTeapot {
		t.Errorf("ProbeAll = %+v", got)
	}
}

func TestURLs(t *testing.T) {
	tests := []struct {
		in, registry, service string
	}{
		{"registry.k8s.io", "https://registry.k8s.io/v2/", "https://registry.k8s.io"},
		{"localhost:5000", "https://localhost:5000/v2/", "https://localhost:5000"},
		{"http://10.0.0.5:8080/kbs", "http://10.0.0.5:8080/v2/", "http://10.0.0.5:8080/kbs"},
		{"https://quay.io/v2/?x=1", "https://quay.io/v2/", "https://quay.io/v2/?x=1"},
		{"ftp://example.org", "", ""},
		{"", "", ""},
		{"https://", "", ""},
	}
	for _, tt := range tests {
		r, rerr := RegistryURL(tt.in)
		s, serr := ServiceURL(tt.in)
		if r != tt.registry || (rerr != nil) != (tt.registry == "") {
			t.Errorf("RegistryURL(%q) = %q, %v; want %q", tt.in, r, rerr, tt.registry)
		}
		if s != tt.service || (serr != nil) != (tt.service == "") {
			t.Errorf("ServiceURL(%q) = %q, %v; want %q", tt.in, s, serr, tt.service)
		}
	}
}
