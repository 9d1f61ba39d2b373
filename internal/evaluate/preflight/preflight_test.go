package preflight

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/internal/present/report"
	"berth.dev/berth/internal/testkit/testhosts"
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
			root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", tc.host))
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
			if all.FactsDigest != "" {
				t.Errorf("digest %s computed without Options.Digest", all.FactsDigest)
			}
			dig, err := Run(context.Background(), root, Options{Discover: discover.Options{Now: now}, Digest: true})
			if err != nil {
				t.Fatal(err)
			}
			if want, err := dig.Facts.Digest(); err != nil || dig.FactsDigest != want {
				t.Errorf("digest %q, Facts.Digest %q (%v)", dig.FactsDigest, want, err)
			}
			if want, _ := all.Facts.Digest(); dig.FactsDigest != want {
				t.Errorf("digest %q of the same host, %q without Options.Digest", dig.FactsDigest, want)
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

// TestAllJSONEqualsEncodingJSON writes `berth check --all -o json` of
// every fixture host both ways: through the report's own JSON writer, as
// Render does, and through encoding/json of its wire form, as it did
// before; the bytes must be the same.
func TestAllJSONEqualsEncodingJSON(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	for _, name := range testhosts.Names(t) {
		t.Run(name, func(t *testing.T) {
			root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", name))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), root, Options{Discover: discover.Options{Now: now}, All: true})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := report.New(res.Facts, "matrix", res.Verdicts, report.Opts{All: true})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := output.Render(&buf, output.JSON, rep, nil); err != nil {
				t.Fatal(err)
			}
			want, err := output.EncodeJSON(rep.WireValue())
			if err != nil {
				t.Fatal(err)
			}
			if got := buf.Bytes(); !bytes.Equal(got, want) {
				i := 0
				for i < min(len(got), len(want)) && got[i] == want[i] {
					i++
				}
				t.Fatalf("%d bytes, encoding/json %d; first difference at %d: %q, want %q",
					len(got), len(want), i, got[i:min(i+80, len(got))], want[i:min(i+80, len(want))])
			}
		})
	}
}

// TestHostPlatformsTwins holds HostPlatforms, which finds a platform's
// twin on the default snapshotter in the distribution's list, to the
// platforms a twin built with platform.New leaves: on every distribution
// and CPU product line.
func TestHostPlatformsTwins(t *testing.T) {
	lines := []string{"", "milan", "genoa", "turin", "sapphirerapids"}
	for _, d := range platform.Distributions() {
		for _, line := range lines {
			f := &facts.Facts{}
			f.Distribution.Name = d.String()
			f.CPU.ProductLine = line
			got := HostPlatforms(f, false)
			cpu, _ := platform.ProductLineOfCPU(line)
			var want []platform.Platform
			for _, p := range platform.AllFor(d) {
				if pl := p.ProductLine(); pl.Pinned() && pl != cpu {
					continue
				}
				if p.Snapshotter() != p.DefaultSnapshotter() {
					s := p.Spec()
					s.Snapshotter = 0
					if twin, err := platform.New(s); err == nil && twin.Shim() == p.Shim() {
						continue
					}
				}
				want = append(want, p)
			}
			if len(want) == 0 || !slices.EqualFunc(got, want, func(a, b platform.Platform) bool { return a.String() == b.String() }) {
				t.Errorf("%s, %q: %d platforms, want %d", d, line, len(got), len(want))
			}
		}
	}
}

// TestRunPlanned holds Run, which plans the evaluation of known platforms
// (all, or requested) while discovery runs, to evaluating them after it.
func TestRunPlanned(t *testing.T) {
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	all := platform.All()
	lean := slices.DeleteFunc(slices.Clone(all), platform.Platform.Debug)
	for _, host := range []string{"snp-genoa-k3s-ready", "tdx-emr-kubeadm-ready", "openshift-crio"} {
		root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", host))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			opt  Options
			want []platform.Platform
		}{
			{"all", Options{All: true}, all},
			{"all without debug", Options{All: true, NoDebug: true}, lean},
			{"requested", Options{Platforms: all[:7], Catalogue: catalog.All()}, all[:7]},
		} {
			t.Run(host+"/"+tc.name, func(t *testing.T) {
				tc.opt.Discover = discover.Options{Now: now}
				res, err := Run(context.Background(), root, tc.opt)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(res.Platforms, tc.want) || res.Defaulted != (tc.opt.Platforms == nil) {
					t.Fatalf("%d platforms (defaulted %v), want %d", len(res.Platforms), res.Defaulted, len(tc.want))
				}
				ev, err := check.NewEvaluator(catalog.For(res.Facts))
				if err != nil {
					t.Fatal(err)
				}
				if want := ev.Evaluate(res.Facts, tc.want, check.Options{}); !reflect.DeepEqual(res.Verdicts, want) {
					t.Error("verdicts differ from an evaluation after discovery")
				}
			})
		}
	}
}
