package configure

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"berth.dev/berth/internal/testkit/upstreamtest"
)

// TestHypervisorAnnotationsUpstream: the annotations berth accepts in an
// allowlist are exactly the hypervisor annotations Kata 4.1's two
// runtimes define (copies of their sources in testdata/upstream).
func TestHypervisorAnnotationsUpstream(t *testing.T) {
	var want []string
	for _, src := range []struct {
		file string
		re   *regexp.Regexp
	}{
		{"src/runtime/virtcontainers/pkg/annotations/annotations.go",
			regexp.MustCompile(`(?:kataAnnotHypervisorPrefix \+ "|kataConfAnnotationsPrefix \+ "hypervisor\.)([a-z0-9_.]+)"`)},
		{"src/libs/kata-types/src/annotations/mod.rs",
			regexp.MustCompile(`"io\.katacontainers\.config\.hypervisor\.([a-z0-9_.]+)"`)},
	} {
		data, err := os.ReadFile(upstreamtest.Path(t, "kata-containers-4.1.0", src.file))
		if err != nil {
			t.Fatal(err)
		}
		ms := src.re.FindAllStringSubmatch(string(data), -1)
		if len(ms) < 40 {
			t.Fatalf("%s: only %d hypervisor annotations found: the pattern no longer matches the source", src.file, len(ms))
		}
		for _, m := range ms {
			want = append(want, m[1])
		}
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if got := hypervisorAnnotations(); !slices.Equal(got, want) {
		t.Errorf("hypervisorAnnotations() =\n%q\nwant (from Kata 4.1's sources)\n%q", got, want)
	}
}
