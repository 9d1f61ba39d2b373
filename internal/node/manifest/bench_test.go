package manifest

import (
	"os"
	"testing"

	"berth.dev/berth/platform"
)

func BenchmarkParseExample(b *testing.B) {
	data, err := os.ReadFile(example)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data, "example"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanAllPlatforms resolves the example for every valid platform,
// what a matrix view of "bytes needed per platform" costs.
func BenchmarkPlanAllPlatforms(b *testing.B) {
	m := mustLoad(b, example)
	all := platform.All()
	b.ReportMetric(float64(len(all)), "platforms")
	for b.Loop() {
		for _, p := range all {
			if _, err := m.Resolve(p); err != nil {
				b.Fatal(err)
			}
		}
	}
}
