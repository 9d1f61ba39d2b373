package preflight

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/internal/present/report"
)

// benchHost is the fixture modelled on the build machine, where the bench
// table's `berth check --all --no-probe -o json` runs.
const benchHost = "buildmachine-firecracker"

// benchFacts discovers the bench host once: discovery is shared with the
// default set and benchmarked in internal/host/discover; what --all adds is
// everything after it.
func benchFacts(b *testing.B) *facts.Facts {
	b.Helper()
	root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", benchHost))
	if err != nil {
		b.Fatal(err)
	}
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	return discover.Run(context.Background(), root, discover.Options{Now: now})
}

// BenchmarkCheckAll is `berth check --all -o json` after discovery, in
// memory: facts -> platforms -> verdicts -> report -> JSON bytes, whole
// ("all") and stage by stage, so that a change to one stage shows in its
// own numbers.
func BenchmarkCheckAll(b *testing.B) {
	f := benchFacts(b)
	opts := report.Opts{All: true}
	ev, err := check.NewEvaluator(catalog.For(f))
	if err != nil {
		b.Fatal(err)
	}
	ps := HostPlatforms(f, true)
	vs := ev.Evaluate(f, ps, check.Options{})
	rep, err := report.New(f, "matrix", vs, opts)
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	render := func(rep *report.Report) {
		buf.Reset()
		if err := output.Render(&buf, output.JSON, rep, nil); err != nil {
			b.Fatal(err)
		}
	}
	render(rep)
	b.Logf("%d platforms, %d bytes of JSON", len(ps), buf.Len())

	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev, err := check.NewEvaluator(catalog.For(f))
			if err != nil {
				b.Fatal(err)
			}
			ps := HostPlatforms(f, true)
			rep, err := report.New(f, "matrix", ev.Evaluate(f, ps, check.Options{}), opts)
			if err != nil {
				b.Fatal(err)
			}
			render(rep)
		}
	})
	b.Run("platforms", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			HostPlatforms(f, true)
		}
	})
	b.Run("evaluate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev.Evaluate(f, ps, check.Options{})
		}
	})
	b.Run("report", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := report.New(f, "matrix", vs, opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			render(rep)
		}
	})
}

// BenchmarkCheckDefault is what `berth check` does after discovery for the
// host's own platforms (the default set, the bench table's P2), stage by
// stage: the catalogue, the platforms, the evaluation, the digest and the
// table.
func BenchmarkCheckDefault(b *testing.B) {
	f := benchFacts(b)
	cat := catalog.All()
	ps := HostPlatforms(f, false)
	ev, err := check.NewEvaluator(catalog.WithPlugins(cat, f))
	if err != nil {
		b.Fatal(err)
	}
	vs := ev.Evaluate(f, ps, check.Options{})
	b.Logf("%d platforms", len(ps))
	b.Run("catalogue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			catalog.All()
		}
	})
	b.Run("platforms", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			HostPlatforms(f, false)
		}
	})
	b.Run("evaluate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ev, err := check.NewEvaluator(catalog.WithPlugins(cat, f))
			if err != nil {
				b.Fatal(err)
			}
			ev.Evaluate(f, ps, check.Options{})
		}
	})
	b.Run("digest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := f.Digest(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("table", func(b *testing.B) {
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			rep := report.NewDigested(f, "sha256:0", "matrix", vs, report.Opts{})
			if err := report.WriteMatrix(&buf, rep, ps, report.Style{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
