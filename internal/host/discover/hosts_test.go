package discover

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit"
	"berth.dev/berth/internal/testkit/goldenfile"
	"berth.dev/berth/internal/testkit/testhosts"
)

// hostsDir holds the fixture host trees shared by all tests.
const hostsDir = "../../../testdata/hosts"

// benchHost is the fixture BenchmarkDiscoverFixture discovers.
const benchHost = "snp-genoa-k3s-ready"

// discoverHost runs discovery on one fixture with the fixed clock; Root is
// normalised so that goldens do not depend on the checkout path.
func discoverHost(t testing.TB, name string) *facts.Facts {
	t.Helper()
	root, err := hostfs.OpenDir(filepath.Join(hostsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	f := Run(context.Background(), root, Options{Now: fixedNow})
	f.Root = "testdata/hosts/" + name
	return f
}

func TestHostsGolden(t *testing.T) {
	testkit.NeedsRoot(t, "the goldens, which record the fixtures' owner (root in CI; uid 0),")
	for _, h := range testhosts.Names(t) {
		t.Run(h, func(t *testing.T) {
			f := discoverHost(t, h)
			b, err := json.MarshalIndent(f, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, '\n')
			if len(b) > 16<<10 {
				t.Errorf("facts JSON of %s is %d bytes, over the 16 KiB budget", h, len(b))
			}
			goldenfile.Assert(t, filepath.Join("testdata", "golden", h+".json"), b)
		})
	}
}

// BenchmarkDiscoverFixture is discovery of one fixture root (budget: 5 ms).
func BenchmarkDiscoverFixture(b *testing.B) {
	root, err := hostfs.OpenDir(filepath.Join(hostsDir, benchHost))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		Run(ctx, root, Options{Now: fixedNow})
	}
}
