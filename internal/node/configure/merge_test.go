package configure

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"berth.dev/berth/internal/host/runtimecfg"
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

// TestReplaceKey: the imports block takes the place of the file's own
// imports key however it is written, parses, and removing it restores the
// file byte for byte.
func TestReplaceKey(t *testing.T) {
	body := []byte("imports = [\"conf.d/*.toml\"]\n")
	cases := []struct {
		name, in, want string
	}{
		{"empty list (containerd 2.1 config default)", "version = 3\nroot = '/var/lib/containerd'\nimports = []\n\n[grpc]\n",
			"version = 3\nroot = '/var/lib/containerd'\n# BEGIN berth:imports\n#| imports = []\nimports = [\"conf.d/*.toml\"]\n# END berth:imports\n\n[grpc]\n"},
		{"before version (containerd 1.7 config default)", "disabled_plugins = []\nimports = []\noom_score = 0\nversion = 2\n",
			"disabled_plugins = []\n# BEGIN berth:imports\n#| imports = []\nimports = [\"conf.d/*.toml\"]\n# END berth:imports\noom_score = 0\nversion = 2\n"},
		{"multi-line with comments and brackets in strings", "version = 3\nimports = [\n  \"/a/[x].toml\", # one ]\n  '/b/*.toml',\n]\n[t]\n",
			"version = 3\n# BEGIN berth:imports\n#| imports = [\n#|   \"/a/[x].toml\", # one ]\n#|   '/b/*.toml',\n#| ]\nimports = [\"conf.d/*.toml\"]\n# END berth:imports\n[t]\n"},
		{"after a multi-line value", "disabled_plugins = [\n  \"x\",\n]\nimports = ['/etc/x.toml']\n",
			"disabled_plugins = [\n  \"x\",\n]\n# BEGIN berth:imports\n#| imports = ['/etc/x.toml']\nimports = [\"conf.d/*.toml\"]\n# END berth:imports\n"},
		{"last line without newline", "version = 3\nimports = []",
			"version = 3\n# BEGIN berth:imports +nl\n#| imports = []\nimports = [\"conf.d/*.toml\"]\n# END berth:imports\n"},
		{"no key: inserted at the top", "version = 3\n[grpc]\n",
			"version = 3\n# BEGIN berth:imports\nimports = [\"conf.d/*.toml\"]\n# END berth:imports\n[grpc]\n"},
		{"key inside a table is not top level", "version = 3\n[x]\nimports = []\n",
			"version = 3\n# BEGIN berth:imports\nimports = [\"conf.d/*.toml\"]\n# END berth:imports\n[x]\nimports = []\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MergeBlock("f", []byte(tc.in), "imports", body, ReplaceKey)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got\n%q\nwant\n%q", got, tc.want)
			}
			var doc map[string]any
			if err := toml.Unmarshal(got, &doc); err != nil {
				t.Errorf("result does not parse: %v", err)
			}
			again, err := MergeBlock("f", got, "imports", body, ReplaceKey)
			if err != nil || !bytes.Equal(again, got) {
				t.Errorf("second merge changed the file (%v):\n%q", err, again)
			}
			back, removed, err := RemoveBlock("f", got, "imports")
			if err != nil || !removed || string(back) != tc.in {
				t.Errorf("remove: %v %v\n%q\nwant\n%q", removed, err, back, tc.in)
			}
		})
	}
	if _, err := MergeBlock("f", []byte("imports = [\"x\n"), "imports", body, ReplaceKey); err == nil {
		t.Error("unterminated string accepted")
	}
}

// FuzzImports: for any config that parses, extending its imports keeps
// every entry it had, adds berth's, parses, is idempotent, and removing
// the block gives back the file byte for byte.
func FuzzImports(f *testing.F) {
	for _, s := range []string{
		"version = 3\nimports = []\n[grpc]\naddress = 'x'\n",
		"imports = [\n  '/a/*.toml', # c ]\n  \"b.toml\",\n]\nversion = 3\n",
		"version = 3\nimports = [\"\"\"x\"\"\"]",
		"version = 3\n[plugins]\n",
		"",
	} {
		f.Add([]byte(s))
	}
	imp := File{Path: "etc/containerd/config.toml", Kind: Block, BlockID: "imports", Where: ReplaceKey, Format: "toml",
		Import: "conf.d/*.toml", Base: []byte("version = 3\n"), When: UnlessImported, SkipIfImports: "etc/containerd/conf.d/berth-x.toml",
		Content: []byte("imports = [\"conf.d/*.toml\"]\n")}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Contains(data, []byte("berth:")) || bytes.Contains(data, []byte("\r")) {
			return
		}
		c, err := runtimecfg.ParseContainerd("f", data)
		if err != nil {
			return
		}
		next, skip, err := nextContent(imp, "etc/containerd/config.toml", data, true)
		if err != nil || skip {
			return // refused with a reason, or already imported
		}
		got, err := runtimecfg.ParseContainerd("f", next)
		if err != nil {
			t.Fatalf("result does not parse: %v\n%q", err, next)
		}
		if !slices.Contains(got.Imports, imp.Import) || !slices.Equal(got.Imports[:len(c.Imports)], c.Imports) {
			t.Fatalf("imports %q -> %q", c.Imports, got.Imports)
		}
		again, _, err := nextContent(imp, "etc/containerd/config.toml", next, true)
		if err != nil || !bytes.Equal(again, next) {
			t.Fatalf("not idempotent: %v\n%q\n%q", err, next, again)
		}
		back, ok, err := RemoveBlock("f", next, "imports")
		if err != nil || !ok || !bytes.Equal(back, data) {
			t.Fatalf("remove: %v %v\n%q\nwant\n%q", ok, err, back, data)
		}
	})
}
