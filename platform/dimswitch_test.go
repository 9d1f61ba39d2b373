package platform_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dimensionTypes are the platform dimensions whose properties live in this
// package's tables. The container runtime (Runtime: containerd or CRI-O) is
// not among them: it is a field of the distribution's Layout, and the code
// that writes a containerd or a CRI-O configuration is different code, not
// a different property value.
var dimensionTypes = []string{"Distribution", "Hypervisor", "KataRuntime", "TEE", "ProductLine", "Snapshotter"}

// dimensionNames are spellings of dimension values that are unambiguous
// as strings: the TEEs and the SNP product lines (with the Zen 4 parts that
// share Genoa's firmware). Hypervisor names are left out because the
// host's own hypervisor (facts.Virt) uses the same words for another thing.
var dimensionNames = []string{"snp", "tdx", "milan", "genoa", "bergamo", "siena", "turin"}

// dimensionAllowed are the places outside platform/ that may still branch
// on a dimension, each with the reason it was reviewed. The key is
// "<path>:<function>".
var dimensionAllowed = map[string]string{
	// Each TEE's host checks are an area of their own (snp.*, tdx.*)
	// reading that TEE's facts; the predicate is the area's applicability,
	// not a property that another row could carry.
	"internal/evaluate/catalog/checks.go:isSNP": "the snp.* check area applies to SNP platforms",
	"internal/evaluate/catalog/checks.go:isTDX": "the tdx.* check area applies to TDX platforms",
	// The reference-value computations are per-TEE algorithms in
	// internal/node/refvalues (SNP launch digest, TDX MRTD); the switch picks the
	// algorithm and its flags.
	"internal/cli/refvalues.go:runRefvalues": "chooses the SNP or TDX measurement algorithm",
	// Kata's two runtimes have two template families; they are Kata's data,
	// kept equal to testdata/upstream by TestKataConfigConformance.
	"internal/node/configure/kata_upstream.go:templateBase": "Kata's Go and Rust template data",
}

// TestNoDimensionSwitchOutsidePlatform walks every non-test Go file of the
// module outside platform/ and fails on a switch over a dimension value, a
// comparison with one, a table keyed by one, or a comparison with a TEE or
// product-line name: those properties belong in this package's tables,
// where a new hypervisor or TEE is one row.
func TestNoDimensionSwitchOutsidePlatform(t *testing.T) {
	consts := dimensionConsts(t)
	if len(consts) < 25 {
		t.Fatalf("only %d dimension constants found in platform/: the parser lost them", len(consts))
	}
	var found []string
	files := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "platform" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		files++
		found = append(found, dimensionUses(t, path, consts)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files walked: the module root was not found", files)
	}
	seen := map[string]bool{}
	var bad []string
	for _, f := range found {
		key, what, _ := strings.Cut(f, " ")
		seen[key] = true
		if _, ok := dimensionAllowed[key]; !ok {
			bad = append(bad, key+": "+what)
		}
	}
	for key := range dimensionAllowed {
		if !seen[key] {
			t.Errorf("allow-list entry %s matches nothing: remove it", key)
		}
	}
	t.Logf("%d dimension branches outside platform/ (%d allowed)", len(found), len(found)-len(bad))
	if len(bad) > 0 {
		t.Errorf("%d switches or comparisons on a platform dimension outside platform/; "+
			"add the property to the dimension's table in platform/ and ask the Platform:\n\t%s",
			len(bad), strings.Join(bad, "\n\t"))
	}
}

// dimensionConsts parses platform/'s own sources for the constants of the
// dimension types, so that a new constant is covered without editing this
// test.
func dimensionConsts(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			typ := ""
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				} else if vs.Type != nil || len(vs.Values) > 0 && typ != "" && !usesIota(vs) {
					// An explicit other type, or a fresh untyped value, ends
					// the implicit repetition.
					typ = ""
				}
				if slices.Contains(dimensionTypes, typ) {
					for _, n := range vs.Names {
						out[n.Name] = true
					}
				}
			}
		}
	}
	return out
}

func usesIota(vs *ast.ValueSpec) bool {
	found := false
	for _, v := range vs.Values {
		ast.Inspect(v, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && id.Name == "iota" {
				found = true
			}
			return true
		})
	}
	return found
}

// dimensionUses returns "<path>:<func> <what>" for every dimension branch
// in one file.
func dimensionUses(t *testing.T, path string, consts map[string]bool) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	pkgName := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "berth.dev/berth/platform" {
			pkgName = "platform"
			if imp.Name != nil {
				pkgName = imp.Name.Name
			}
		}
	}
	isConst := func(e ast.Expr) bool {
		s, ok := ast.Unparen(e).(*ast.SelectorExpr)
		if !ok || pkgName == "" {
			return false
		}
		x, ok := s.X.(*ast.Ident)
		return ok && x.Name == pkgName && consts[s.Sel.Name]
	}
	isName := func(e ast.Expr) bool {
		l, ok := ast.Unparen(e).(*ast.BasicLit)
		if !ok || l.Kind != token.STRING {
			return false
		}
		s, err := strconv.Unquote(l.Value)
		return err == nil && slices.Contains(dimensionNames, s)
	}
	rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
	var out []string
	for _, decl := range f.Decls {
		fn := "(file)"
		switch d := decl.(type) {
		case *ast.FuncDecl:
			fn = d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				fn = recvName(d.Recv.List[0].Type) + "." + fn
			}
		case *ast.GenDecl:
			if d.Tok == token.IMPORT {
				continue
			}
		}
		add := func(n ast.Node, what string) {
			out = append(out, fmt.Sprintf("%s:%s %s at line %d", rel, fn, what, fset.Position(n.Pos()).Line))
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SwitchStmt:
				if n.Tag == nil {
					return true
				}
				for _, c := range n.Body.List {
					if slices.ContainsFunc(c.(*ast.CaseClause).List, func(e ast.Expr) bool { return isConst(e) || isName(e) }) {
						add(n, "switch")
						break
					}
				}
			case *ast.BinaryExpr:
				if (n.Op == token.EQL || n.Op == token.NEQ) &&
					(isConst(n.X) || isConst(n.Y) || isName(n.X) || isName(n.Y)) {
					add(n, "comparison")
				}
			case *ast.KeyValueExpr:
				if isConst(n.Key) {
					add(n, "table keyed by a dimension")
				}
			}
			return true
		})
	}
	return out
}

func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}
