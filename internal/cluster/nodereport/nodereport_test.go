package nodereport

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/evaluate/preflight"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/goldenfile"
	"berth.dev/berth/internal/testkit/testhosts"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func fixtureReport(t testing.TB, host string) v1alpha1.Report {
	t.Helper()
	root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", host))
	if err != nil {
		t.Fatal(err)
	}
	// As the agent runs it (internal/cluster/agent): without the debug twins.
	res, err := preflight.Run(context.Background(), root, preflight.Options{Discover: discover.Options{Now: func() time.Time { return epoch }}, NoDebug: true})
	if err != nil {
		t.Fatal(err)
	}
	return Build(host, "v0.0.0-test", res.Facts, res.Verdicts, epoch)
}

// TestFixtures checks the report of every fixture host against a golden
// file, its size against the 8 KiB target, and the hash and labels.
func TestFixtures(t *testing.T) {
	hosts := testhosts.Names(t)
	if len(hosts) < 10 {
		t.Fatalf("only %d fixture hosts", len(hosts))
	}
	for _, h := range hosts {
		t.Run(h, func(t *testing.T) {
			r := fixtureReport(t, h)
			b, err := json.MarshalIndent(r, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			compact, _ := json.Marshal(r)
			if len(compact) > 8<<10 {
				t.Errorf("report is %d bytes, want under 8 KiB", len(compact))
			}
			t.Logf("%s: %d bytes, %d platforms, %d findings (+%d omitted)", h, len(compact), len(r.Platforms), len(r.Findings), r.FindingsOmitted)
			goldenfile.Assert(t, filepath.Join("testdata", h+".json"), append(b, '\n'))
			if r.ContentHash != Hash(r) || !strings.HasPrefix(r.ContentHash, "sha256:") {
				t.Errorf("hash %q not reproducible", r.ContentHash)
			}
			var back v1alpha1.Report
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if Hash(back) != r.ContentHash {
				t.Errorf("hash changes over a JSON round trip")
			}
			l := Labels(&r)
			if l[TEELabel] == "" || (l[KVMLabel] != "true" && l[KVMLabel] != "false") {
				t.Errorf("labels %v", l)
			}
			for k := range l {
				name := strings.TrimPrefix(k, v1alpha1.LabelPrefix)
				if len(name) > 63 {
					t.Errorf("label key %q too long", k)
				}
			}
		})
	}
}

func TestHashIgnoresObservedAt(t *testing.T) {
	r := fixtureReport(t, "snp-genoa-k3s-ready")
	later := r
	later.ObservedAt.Time = epoch.Add(time.Hour)
	if Hash(later) != r.ContentHash {
		t.Error("ObservedAt changes the hash")
	}
	edited := r
	edited.Facts.KernelRelease = "6.1.0-hand-edited"
	if Hash(edited) == r.ContentHash {
		t.Error("an edit does not change the hash")
	}
}

func TestLabelsAndTEE(t *testing.T) {
	for host, tt := range map[string]struct{ tee, kataDeploy string }{
		"snp-genoa-k3s-ready":   {"snp", "amd.feature.node.kubernetes.io/snp"},
		"tdx-emr-kubeadm-ready": {"tdx", "intel.feature.node.kubernetes.io/tdx"},
		"cloud-vm-no-nested":    {"none", ""},
		"snp-milan-bios-off":    {"none", ""},
	} {
		r := fixtureReport(t, host)
		if got := TEE(&r); got != tt.tee {
			t.Errorf("%s: tee %q, want %q", host, got, tt.tee)
		}
		// kata-deploy's NodeFeatureRule label for the enabled TEE, and
		// nothing without one.
		kd := KataDeployLabels(&r)
		if (tt.kataDeploy == "") != (len(kd) == 0) || (tt.kataDeploy != "" && (len(kd) != 1 || kd[tt.kataDeploy] != "true" || !IsKataDeployLabel(tt.kataDeploy))) {
			t.Errorf("%s: kata-deploy labels %v, want %q", host, kd, tt.kataDeploy)
		}
	}
	r := fixtureReport(t, "snp-genoa-k3s-ready")
	l := Labels(&r)
	ready := 0
	for _, p := range r.Platforms {
		v, ok := l[PlatformLabelPrefix+p.Name]
		if LabelFits(p.Name) != ok {
			t.Errorf("%s: label present %v, fits %v", p.Name, ok, LabelFits(p.Name))
		}
		if v == "true" {
			ready++
		}
	}
	if ready == 0 || l[KVMLabel] != "true" {
		t.Errorf("a ready host has no ready platform label: %v", l)
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"0123456789", 10, "0123456789"},
		{"0123456789ab", 10, "0123456…"},
		{"ééééé", 7, "éé…"},
	} {
		if got := clip(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func BenchmarkBuild(b *testing.B) {
	root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", "gpu-h100-vfio-isolated"))
	if err != nil {
		b.Fatal(err)
	}
	// As the agent runs it (internal/cluster/agent): without the debug twins.
	res, err := preflight.Run(context.Background(), root, preflight.Options{Discover: discover.Options{Now: func() time.Time { return epoch }}, NoDebug: true})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		Build("n", "v", res.Facts, res.Verdicts, epoch)
	}
}
