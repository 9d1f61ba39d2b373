// Package netprobe checks, on request, whether the services a sandbox
// depends on over the network answer from this host: the container
// registry its images come from and the attestation service (a KBS or
// Contrast coordinator) its guest must reach. It is the only place in
// berth that opens network connections for checks; discovery calls it
// only when berth check --network asks for it, and only on a live root.
package netprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"berth.dev/berth/internal/host/facts"
)

// Roles of a target.
const (
	RoleRegistry    = "registry"
	RoleAttestation = "attestation"
)

// DefaultTimeout bounds one probe when Prober.Timeout is zero: long enough
// for a TLS handshake across continents, short enough that an offline node
// answers within seconds.
const DefaultTimeout = 5 * time.Second

// Target is one service to probe.
type Target struct {
	Role string
	URL  string
}

// Prober probes targets with Client, each bounded by Timeout. The client
// is the caller's (tests pass an httptest server's); it should not follow
// redirects, since any answer proves the service reachable.
type Prober struct {
	Client  *http.Client
	Timeout time.Duration
}

// NewClient returns the client berth uses for probes: the default
// transport's settings (so HTTPS_PROXY and NO_PROXY apply, as they do for
// containerd's pulls) and no redirects.
func NewClient() *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

func (p Prober) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultTimeout
}

// ProbeAll probes every target concurrently and returns the results in the
// order of targets, so that the whole run takes about one timeout.
func (p Prober) ProbeAll(ctx context.Context, targets []Target) []facts.Endpoint {
	out := make([]facts.Endpoint, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = p.Probe(ctx, t)
		}()
	}
	wg.Wait()
	return out
}

// Probe sends one GET to t.URL. Any HTTP answer, whatever its status, makes
// the target reachable; so does a TLS handshake whose certificate this
// host does not trust (recorded as CertUntrusted), because the guest that
// will talk to the service verifies it against its own trust anchors.
func (p Prober) Probe(ctx context.Context, t Target) facts.Endpoint {
	e := facts.Endpoint{Role: t.Role, URL: t.URL}
	client := p.Client
	if client == nil {
		client = NewClient()
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		e.Failure, e.Error = "error", err.Error()
		return e
	}
	req.Header.Set("User-Agent", "berth-netprobe")
	resp, err := client.Do(req)
	if err != nil {
		if untrustedCert(err) {
			e.Reachable, e.CertUntrusted = true, true
			e.Error = err.Error()
			return e
		}
		e.Failure, e.Error = Classify(err), err.Error()
		return e
	}
	// A little of the body lets the connection be reused; the rest is
	// of no interest.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	e.Reachable, e.HTTPStatus = true, resp.StatusCode
	return e
}

// Classify names the kind of a failed request: timeout, refused, dns, tls
// or error.
func Classify(err error) string {
	var (
		dnsErr *net.DNSError
		netErr net.Error
		recErr tls.RecordHeaderError
		alert  tls.AlertError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.As(err, &dnsErr):
		return "dns"
	case errors.As(err, &recErr), errors.As(err, &alert):
		return "tls"
	}
	return "error"
}

// untrustedCert reports a certificate that did not verify.
func untrustedCert(err error) bool {
	var (
		verr  *tls.CertificateVerificationError
		unk   x509.UnknownAuthorityError
		inv   x509.CertificateInvalidError
		hname x509.HostnameError
	)
	return errors.As(err, &verr) || errors.As(err, &unk) || errors.As(err, &inv) || errors.As(err, &hname)
}

// RegistryURL turns a registry host ("registry.k8s.io",
// "localhost:5000", "https://quay.io") into the OCI distribution API
// base, <scheme>://<host>/v2/, which every registry answers (200, or 401
// to anonymous clients).
func RegistryURL(s string) (string, error) {
	u, err := parseURL(s)
	if err != nil {
		return "", fmt.Errorf("registry %q: %w", s, err)
	}
	u.Path, u.RawQuery, u.Fragment = "/v2/", "", ""
	return u.String(), nil
}

// ServiceURL validates an attestation service URL; a bare host[:port] is
// taken as https.
func ServiceURL(s string) (string, error) {
	u, err := parseURL(s)
	if err != nil {
		return "", fmt.Errorf("attestation service %q: %w", s, err)
	}
	return u.String(), nil
}

func parseURL(s string) (*url.URL, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty")
	}
	if !strings.Contains(s, "://") {
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q: expected http or https", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("no host")
	}
	return u, nil
}
