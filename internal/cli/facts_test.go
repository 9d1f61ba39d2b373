package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
)

const fixtureRoot = "../../testdata/hosts/snp-genoa-k3s-ready"

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
	return code, out.String(), errb.String()
}

func TestFactsFixture(t *testing.T) {
	code, out, stderr := runCLI(t, "facts", "--root", fixtureRoot, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var f facts.Facts
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatal(err)
	}
	if f.SchemaVersion != facts.SchemaVersion || f.Live || f.CPU.ProductLine != "genoa" {
		t.Errorf("facts: live=%v cpu=%+v", f.Live, f.CPU)
	}
	code, out, _ = runCLI(t, "facts", "--root", fixtureRoot)
	if code != 0 || !strings.Contains(out, "product line  genoa") || !strings.Contains(out, "Unknown facts") {
		t.Errorf("table output:\n%s", out)
	}
	code, out, _ = runCLI(t, "facts", "--schema")
	if code != 0 || !strings.Contains(out, `"$defs"`) {
		t.Errorf("--schema: %d", code)
	}
}

func TestFactsBadRoot(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.tar.gz")
	os.WriteFile(bad, []byte("not an archive"), 0o644)
	for _, args := range [][]string{
		{"facts", "--root", bad},
		{"facts", "--root", "/nonexistent/root"},
		{"facts", "--root", bad, "--live"},
		{"facts", "-o", "xml", "--root", fixtureRoot},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != ExitUsage || !strings.HasPrefix(stderr, "Error: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	_, _, stderr := runCLI(t, "facts", "--root", bad)
	if !strings.Contains(stderr, "not a valid berth snapshot") {
		t.Errorf("unclear error: %q", stderr)
	}
}

func TestSnapshotCommand(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "host.tar.gz")
	code, _, stderr := runCLI(t, "snapshot", "--root", fixtureRoot, "-o", dest)
	if code != 0 || !strings.Contains(stderr, "wrote "+dest) {
		t.Fatalf("snapshot: exit %d: %s", code, stderr)
	}
	_, direct, _ := runCLI(t, "facts", "--root", fixtureRoot, "-o", "json")
	code, fromSnap, stderr := runCLI(t, "facts", "--root", dest, "-o", "json")
	if code != 0 {
		t.Fatalf("facts on snapshot: %s", stderr)
	}
	var a, b facts.Facts
	json.Unmarshal([]byte(direct), &a)
	json.Unmarshal([]byte(fromSnap), &b)
	if b.Root != dest || a.CPU.ModelName != b.CPU.ModelName || a.Kernel.Release != b.Kernel.Release || len(a.Unknown) != len(b.Unknown) {
		t.Errorf("snapshot facts differ: %s vs %s", a.Kernel.Release, b.Kernel.Release)
	}
	if code, _, _ := runCLI(t, "snapshot", "--root", fixtureRoot); code != ExitUsage {
		t.Errorf("snapshot without -o: exit %d", code)
	}
	if code, _, _ := runCLI(t, "snapshot", "--root", fixtureRoot, "-o", "x.zip"); code != ExitUsage {
		t.Errorf("snapshot -o x.zip: exit %d", code)
	}
}
