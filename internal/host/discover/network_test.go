package discover

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/netprobe"
)

func TestReachabilityNotChecked(t *testing.T) {
	tests := []struct {
		name string
		np   *NetworkProbe
		want string
	}{
		{"no --network", nil, "not checked (--network not given)"},
		{"offline root", &NetworkProbe{Probe: func(context.Context) []facts.Endpoint { panic("probed an offline root") }}, "not checked (offline root: the network seen from here is not the host's)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tempRoot(t, map[string]string{"etc/hostname": "x\n"}, nil)
			s.opt.Network = tt.np
			var f facts.Facts
			runNetwork(context.Background(), s, &f)
			r := f.Network.Reachability
			if r.Checked || r.NotChecked != tt.want || len(r.Targets) != 0 {
				t.Errorf("reachability = %+v, want not checked: %q", r, tt.want)
			}
			for _, m := range s.unknown {
				if strings.HasPrefix(m.Field, "network.reachability") {
					t.Errorf("reachability recorded as unknown: %+v", m)
				}
			}
		})
	}
}

// liveRoot is a fixture tree that claims to be the live "/", so that the
// live-only network probes run against local test servers.
type liveRoot struct{ hostfs.Root }

func (liveRoot) Live() bool   { return true }
func (liveRoot) Path() string { return "/" }

func TestReachabilityLive(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	defer ok.Close()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	s := tempRoot(t, map[string]string{"etc/hostname": "x\n"}, nil)
	s.root = liveRoot{s.root}
	// The answering server must beat the timeout on a loaded machine too;
	// only the hanging one may meet it.
	prober := netprobe.Prober{Client: netprobe.NewClient(), Timeout: 3 * time.Second}
	targets := []netprobe.Target{
		{Role: netprobe.RoleRegistry, URL: ok.URL + "/v2/"},
		{Role: netprobe.RoleAttestation, URL: hang.URL},
	}
	s.opt.Network = &NetworkProbe{
		Probe:   func(ctx context.Context) []facts.Endpoint { return prober.ProbeAll(ctx, targets) },
		Timeout: prober.Timeout,
	}
	r := s.reachability(context.Background())
	if !r.Checked || r.NotChecked != "" || r.TimeoutMS != 3000 || len(r.Targets) != 2 {
		t.Fatalf("reachability = %+v, want two checked targets", r)
	}
	if got := r.Targets[0]; !got.Reachable || got.HTTPStatus != http.StatusUnauthorized || got.Role != netprobe.RoleRegistry {
		t.Errorf("registry = %+v, want reachable with 401", got)
	}
	if got := r.Targets[1]; got.Reachable || got.Failure != "timeout" || got.Role != netprobe.RoleAttestation {
		t.Errorf("attestation = %+v, want a timeout", got)
	}

	// A host mounted at --root is live but not berth's own network.
	s.root = mountedRoot{s.root}
	if r := s.reachability(context.Background()); r.Checked || !strings.Contains(r.NotChecked, "--root") {
		t.Errorf("mounted root: reachability = %+v, want not checked", r)
	}
}

type mountedRoot struct{ hostfs.Root }

func (mountedRoot) Live() bool   { return true }
func (mountedRoot) Path() string { return "/host" }
