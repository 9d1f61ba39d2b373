package runtimecfg

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestCheckBounds: a config with more keys and tables than MaxEntries is
// refused before the quadratic decoder sees it, fast, naming file and
// line; one at the cap decodes in well under a second. Keys in inline
// tables count; TOML that does not parse is left to the decoder.
func TestCheckBounds(t *testing.T) {
	keys := func(n int) string {
		var b strings.Builder
		b.WriteString("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n")
		for i := range n {
			fmt.Fprintf(&b, "k%d = 1\n", i)
		}
		return b.String()
	}
	tables := func(n int) string {
		var b strings.Builder
		b.WriteString("version = 2\n")
		for i := range n {
			fmt.Fprintf(&b, "[t%d]\n", i)
		}
		return b.String()
	}
	inline := func(n int) string {
		var b strings.Builder
		b.WriteString("version = 2\nx = {")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "k%d = [{a = 1}]", i)
		}
		b.WriteString("}\n")
		return b.String()
	}
	for _, tc := range []struct {
		name, data string
		// line is where the refusal points (0: no refusal).
		line int
	}{
		{"40,000 keys in one table", keys(40000), MaxEntries + 1},
		{"keys at the cap", keys(MaxEntries - 2), 0},
		{"40,000 tables", tables(40000), MaxEntries + 1},
		{"tables at the cap", tables(MaxEntries - 1), 0},
		{"inline tables nested in arrays", inline(MaxEntries), 2},
		{"invalid TOML is the decoder's to report", "version = 2\n[plugins\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := ParseContainerd("etc/containerd/config.toml", []byte(tc.data))
			d := time.Since(start)
			var pe *ParseError
			if tc.line > 0 {
				if !errors.As(err, &pe) || pe.Line != tc.line || !strings.Contains(err.Error(), fmt.Sprintf("more than %d keys and tables", MaxEntries)) || !strings.HasPrefix(err.Error(), "etc/containerd/config.toml:") {
					t.Fatalf("error %v, want the cap refused at line %d", err, tc.line)
				}
			} else if err != nil && !strings.Contains(tc.name, "invalid") {
				t.Fatalf("error %v", err)
			} else if strings.Contains(tc.name, "invalid") && (!errors.As(err, &pe) || strings.Contains(err.Error(), "keys and tables")) {
				t.Fatalf("error %v, want the decoder's", err)
			}
			// Generous for a shared CI machine: unbounded, the 40,000
			// keys took 41 s.
			if d > 3*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}
