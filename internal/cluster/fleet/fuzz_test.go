package fleet

import "testing"

// FuzzDecode: any bytes a NodeReport list item may hold either decode to a
// node named like the object or give an error; Decode never panics, and a
// decoded node's verdicts are ones the analysis knows.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := Decode(b)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		for p, v := range n.Verdicts {
			if p == "" || verdictCode(v) == 0 {
				t.Fatalf("platform %q verdict %q", p, v)
			}
		}
		a := Analyze([]Node{n, n}, nil)
		if a.Nodes != 2 || len(a.Outliers) != 0 {
			t.Fatalf("analysis of two identical nodes: %+v", a)
		}
	})
}
