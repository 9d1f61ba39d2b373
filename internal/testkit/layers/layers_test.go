package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "berth.dev/berth"

// pkg is what `go list -json` says of one package.
type pkg struct {
	ImportPath string
	Imports    []string
}

// listPackages returns every package of the module (tools/ are modules of
// their own) with its non-test imports.
func listPackages(t *testing.T, root string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: the test is not looking at the module", len(pkgs))
	}
	return pkgs
}

// rank places an import path: the wing's index in Wings for internal
// packages, -1 for platform/ and api/ (below every wing), len(Wings()) for
// cmd/ and the rest (above every wing), and ok=false with the wing's name
// for testkit/ and for folders Wings does not know.
func rank(path string) (r int, wing string, ok bool) {
	rel, found := strings.CutPrefix(path, module+"/")
	if !found {
		return 0, "", false
	}
	if rest, in := strings.CutPrefix(rel, "internal/"); in {
		wing, _, _ = strings.Cut(rest, "/")
		if i := slices.Index(Wings(), wing); i >= 0 {
			return i, wing, true
		}
		return 0, wing, false
	}
	top, _, _ := strings.Cut(rel, "/")
	if top == "platform" || top == "api" {
		return -1, top, true
	}
	return len(Wings()), top, true
}

// check returns the rule each import of p breaks.
func check(p pkg) []string {
	from, fromWing, fromOK := rank(p.ImportPath)
	var bad []string
	for _, imp := range p.Imports {
		if !strings.HasPrefix(imp, module+"/") {
			continue
		}
		to, toWing, toOK := rank(imp)
		switch {
		case !toOK && toWing == TestKit && fromWing != TestKit:
			bad = append(bad, p.ImportPath+" imports the test support "+imp)
		case !toOK && toWing != TestKit:
			bad = append(bad, imp+" is in internal/"+toWing+", which is not a wing of layers.Wings")
		case fromOK && toOK && to > from:
			bad = append(bad, p.ImportPath+" ("+fromWing+") imports "+imp+" ("+toWing+"), a higher layer")
		case fromOK && toOK && slices.Contains(Beside()[fromWing], toWing):
			bad = append(bad, p.ImportPath+" ("+fromWing+") imports "+imp+" ("+toWing+"), a wing it stands beside")
		}
	}
	return bad
}

// TestImportsGoDown holds every package of the module to the layer order:
// a lower wing importing a higher one, a product package importing
// testkit, or a package outside the known wings fails it.
func TestImportsGoDown(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	for _, p := range listPackages(t, root) {
		for _, b := range check(p) {
			t.Error(b)
		}
	}
}

// TestCheckCatchesViolations feeds check the imports the rule is there to
// stop, so that TestImportsGoDown cannot pass by checking nothing.
func TestCheckCatchesViolations(t *testing.T) {
	m := func(s string) string { return module + "/" + s }
	for _, tc := range []struct {
		name string
		p    pkg
		bad  int
	}{
		{"host imports evaluate", pkg{m("internal/host/discover"), []string{m("internal/evaluate/check")}}, 1},
		{"node imports cluster", pkg{m("internal/node/configure"), []string{m("internal/cluster/agent")}}, 1},
		{"present imports cluster", pkg{m("internal/present/report"), []string{m("internal/cluster/nodereport")}}, 1},
		{"present imports node", pkg{m("internal/present/output"), []string{m("internal/node/configure")}}, 1},
		{"present imports evaluate and host", pkg{m("internal/present/report"), []string{m("internal/evaluate/check"), m("internal/host/facts")}}, 0},
		{"evaluate imports present", pkg{m("internal/evaluate/preflight"), []string{m("internal/present/report")}}, 1},
		{"platform imports host", pkg{m("platform"), []string{m("internal/host/facts")}}, 1},
		{"product imports testkit", pkg{m("internal/cli"), []string{m("internal/testkit/treetest")}}, 1},
		{"unknown wing", pkg{m("internal/cli"), []string{m("internal/misc/x")}}, 1},
		{"downward and sideways", pkg{m("internal/cluster/agent"), []string{m("internal/cluster/nodereport"), m("internal/evaluate/check"), m("internal/host/facts"), m("platform"), m("api/v1alpha1"), "fmt"}}, 0},
		{"cmd imports cli", pkg{m("cmd/berth"), []string{m("internal/cli")}}, 0},
		{"testkit imports node", pkg{m("internal/testkit/critest"), []string{m("internal/node/cri"), m("internal/testkit/upstreamtest")}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := check(tc.p); len(got) != tc.bad {
				t.Errorf("check(%s) = %q, want %d broken rules", tc.p.ImportPath, got, tc.bad)
			}
		})
	}
}

// TestInternalIsTheWings: internal/ holds the wings and test support only,
// no more than MaxEntries, so that listing it shows the architecture.
func TestInternalIsTheWings(t *testing.T) {
	ents, err := os.ReadDir(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) > MaxEntries {
		t.Errorf("internal/ has %d entries, at most %d", len(ents), MaxEntries)
	}
	for _, e := range ents {
		if !e.IsDir() || (!slices.Contains(Wings(), e.Name()) && e.Name() != TestKit) {
			t.Errorf("internal/%s is not a wing of layers.Wings nor %s", e.Name(), TestKit)
		}
	}
}
