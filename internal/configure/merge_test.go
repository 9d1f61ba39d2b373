package configure

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
)

func TestMergeBlock(t *testing.T) {
	body := []byte("[plugins.x]\na = 1\n")
	cases := []struct {
		name, in string
		where    Where
		want     string
	}{
		{"empty", "", End, "# BEGIN berth:h\n[plugins.x]\na = 1\n# END berth:h\n"},
		{"end", "version = 2\n", End, "version = 2\n# BEGIN berth:h\n[plugins.x]\na = 1\n# END berth:h\n"},
		{"no final newline", "version = 2", End, "version = 2\n# BEGIN berth:h +nl\n[plugins.x]\na = 1\n# END berth:h\n"},
		{"top before first table", "version = 3\n\n[grpc]\n  address = \"x\"\n", Top,
			"version = 3\n\n# BEGIN berth:h\n[plugins.x]\na = 1\n# END berth:h\n[grpc]\n  address = \"x\"\n"},
		{"top without tables", "version = 3", Top, "version = 3\n# BEGIN berth:h +nl\n[plugins.x]\na = 1\n# END berth:h\n"},
		{"replace in place", "a = 1\n# BEGIN berth:h\nold\n# END berth:h\n[t]\n", End,
			"a = 1\n# BEGIN berth:h\n[plugins.x]\na = 1\n# END berth:h\n[t]\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MergeBlock("f", []byte(tc.in), "h", body, tc.where)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
			again, _ := MergeBlock("f", got, "h", body, tc.where)
			if !bytes.Equal(again, got) {
				t.Errorf("second merge changed the file:\n%q", again)
			}
		})
	}
}

func TestRemoveBlockRestoresExactly(t *testing.T) {
	for _, in := range []string{"", "version = 2", "version = 2\n", "a = 1\n[t]\nb = 2"} {
		m1, _ := MergeBlock("f", []byte(in), "p", []byte("[p]\n"), End)
		m2, _ := MergeBlock("f", m1, "q", []byte("[q]\n"), End)
		if ids := Blocks(m2); !slices.Equal(ids, []string{"p", "q"}) {
			t.Fatalf("blocks %v", ids)
		}
		// Remove in the order they were added, then the other way round.
		for _, order := range [][]string{{"p", "q"}, {"q", "p"}} {
			cur := m2
			for _, id := range order {
				var ok bool
				var err error
				cur, ok, err = RemoveBlock("f", cur, id)
				if err != nil || !ok {
					t.Fatalf("remove %s: %v %v", id, ok, err)
				}
			}
			if string(cur) != in {
				t.Errorf("%q: after removing %v got %q", in, order, cur)
			}
		}
	}
}

func TestMergeBlockErrors(t *testing.T) {
	if _, err := MergeBlock("f", []byte("# BEGIN berth:h\nx = 1\n"), "h", []byte("y = 2\n"), End); err == nil ||
		!strings.Contains(err.Error(), "f:1:") {
		t.Errorf("unterminated block: %v", err)
	}
	if _, err := MergeBlock("f", nil, "a b", []byte("x\n"), End); err == nil {
		t.Error("id with a space accepted")
	}
	if _, err := MergeBlock("f", nil, "h", []byte("# END berth:h\n"), End); err == nil {
		t.Error("body with a marker accepted")
	}
}

// FuzzMerge checks the merger on arbitrary files: merging is idempotent,
// other blocks survive, removing restores the file byte for byte, and a
// file that was TOML stays TOML when a TOML table is merged at the end.
func FuzzMerge(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, top bool) {
		if bytes.Contains(data, []byte("berth:")) {
			return // a file with berth's markers is berth's to interpret
		}
		where := End
		if top {
			where = Top
		}
		body := []byte("[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.fuzz]\nruntime_type = \"x\"\n")
		if top {
			body = []byte("imports = [\"conf.d/*.toml\"]\n")
		}
		m, err := MergeBlock("f", data, "fuzz", body, where)
		if err != nil {
			t.Fatal(err)
		}
		again, err := MergeBlock("f", m, "fuzz", body, where)
		if err != nil || !bytes.Equal(again, m) {
			t.Fatalf("merge not idempotent: %v\n%q\n%q", err, m, again)
		}
		m2, err := MergeBlock("f", m, "other", []byte("[other]\n"), End)
		if err != nil {
			t.Fatal(err)
		}
		back, ok, err := RemoveBlock("f", m2, "fuzz")
		if err != nil || !ok {
			t.Fatalf("remove: %v %v", ok, err)
		}
		if !slices.Equal(Blocks(back), []string{"other"}) {
			t.Fatalf("other block lost: %q", back)
		}
		back, _, _ = RemoveBlock("f", back, "other")
		if !bytes.Equal(back, data) {
			t.Fatalf("remove did not restore the file:\n%q\n%q", data, back)
		}
		var v map[string]any
		if !top && toml.Unmarshal(data, &v) == nil && !bytes.Contains(data, []byte("plugins")) {
			if err := toml.Unmarshal(m, &v); err != nil {
				t.Fatalf("valid TOML broken by the merge: %v\n%q", err, m)
			}
		}
	})
}
