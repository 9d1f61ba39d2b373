package refvalues

import (
	"strings"
	"testing"
)

func TestTDXVectors(t *testing.T) {
	for _, row := range readPSV(t, "vectors-tdx.psv", 4) {
		t.Run(row[0], func(t *testing.T) {
			td, err := ParseTDVF(readTestdata(t, row[1]))
			if err != nil {
				t.Fatal(err)
			}
			order, err := ParsePageOrder(strings.SplitN(row[2], ":", 2)[0])
			if err != nil {
				t.Fatal(err)
			}
			if got := MRTD(td, order).String(); got != row[3] {
				t.Errorf("MRTD(%s) = %s, want %s", order, got, row[3])
			}
		})
	}
}
