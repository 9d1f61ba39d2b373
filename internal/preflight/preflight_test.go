package preflight

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/internal/discover"
	"berth.dev/berth/internal/hostfs"
	"berth.dev/berth/platform"
)

func TestRun(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	for _, tc := range []struct {
		host, dist, line string
	}{
		{"snp-genoa-k3s-ready", "k3s", "genoa"},
		{"snp-milan-bios-off", "kubeadm", "milan"},
		{"tdx-emr-kubeadm-ready", "kubeadm", ""},
		{"openshift-crio", "openshift", ""},
	} {
		t.Run(tc.host, func(t *testing.T) {
			root, err := hostfs.OpenDir(filepath.Join("..", "..", "testdata", "hosts", tc.host))
			if err != nil {
				t.Fatal(err)
			}
			all, err := Run(context.Background(), root, Options{Discover: discover.Options{Now: now}})
			if err != nil {
				t.Fatal(err)
			}
			if !all.Defaulted || len(all.Platforms) == 0 || len(all.Verdicts) != len(all.Platforms) {
				t.Fatalf("defaulted %v, %d platforms, %d verdicts", all.Defaulted, len(all.Platforms), len(all.Verdicts))
			}
			debug := 0
			for i, p := range all.Platforms {
				if p.Distribution().String() != tc.dist {
					t.Errorf("%s: platform of another distribution", p)
				}
				if pl := p.ProductLine(); pl != platform.AnyProductLine && pl.String() != tc.line {
					t.Errorf("%s: pinned to another product line than %q", p, tc.line)
				}
				if all.Verdicts[i].Name != p.Name() {
					t.Errorf("verdict %d is %s, platform %s", i, all.Verdicts[i].Name, p.Name())
				}
				if p.Debug() {
					debug++
				}
			}
			lean, err := Run(context.Background(), root, Options{Discover: discover.Options{Now: now}, NoDebug: true})
			if err != nil {
				t.Fatal(err)
			}
			if debug == 0 || len(lean.Platforms) != len(all.Platforms)-debug {
				t.Errorf("NoDebug: %d platforms of %d with %d debug variants", len(lean.Platforms), len(all.Platforms), debug)
			}
			p := all.Platforms[0]
			one, err := Run(context.Background(), root, Options{Discover: discover.Options{Now: now}, Platforms: []platform.Platform{p}, NoDebug: true})
			if err != nil || one.Defaulted || len(one.Verdicts) != 1 || one.Verdicts[0].Status != all.Verdicts[0].Status {
				t.Errorf("requested %s: %+v, %v", p, one.Verdicts, err)
			}
		})
	}
	if got := len(HostPlatforms(nil, true)); got != len(platform.All()) {
		t.Errorf("all: %d platforms, want %d", got, len(platform.All()))
	}
}
