package factstable

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/goldenfile"
)

// TestWriteGolden renders the facts of real-machine fixture hosts: the
// table must match its golden file and stay within 80 columns.
func TestWriteGolden(t *testing.T) {
	for _, host := range []string{"snp-genoa-k3s-ready", "hgx-h100-tdx-ppcie"} {
		t.Run(host, func(t *testing.T) {
			root, err := hostfs.OpenDir(filepath.Join("..", "..", "..", "testdata", "hosts", host))
			if err != nil {
				t.Fatal(err)
			}
			now := func() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }
			f := discover.Run(context.Background(), root, discover.Options{Now: now})
			// Root is normalised so that the golden file does not depend
			// on the checkout path.
			f.Root = "testdata/hosts/" + host
			var tb bytes.Buffer
			if err := Write(&tb, f); err != nil {
				t.Fatal(err)
			}
			for i, l := range bytes.Split(tb.Bytes(), []byte("\n")) {
				if len(l) > tableWidth {
					t.Errorf("table line %d is %d columns: %q", i+1, len(l), l)
				}
			}
			goldenfile.Assert(t, filepath.Join("testdata", host+".table"), tb.Bytes())
		})
	}
}
