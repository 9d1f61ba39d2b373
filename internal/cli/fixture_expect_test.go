package cli

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit/testhosts"
	"berth.dev/berth/platform"
)

// expectFamilies are the Kata runtime classes every fixture's NOTES.md
// judges (testdata/hosts/README.md, "Expected verdicts").
var expectFamilies = []string{"kata-qemu", "kata-clh", "kata-fc", "kata-qemu-snp", "kata-qemu-tdx", "kata-qemu-nvidia-gpu"}

// expectation is one line of a fixture's berth-expect block:
//
//	platform  verdict  first-blocker  # source
//
// verdict is "ready" (ready, with or without warnings: offline roots leave
// probes unknown), "warn" (ready with warnings) or "no" (not ready);
// first-blocker is the ID of the first blocking check, "-" for a platform
// that is ready. Every field and the source are required.
type expectation struct {
	platform, verdict, blocker, source string
	line                               int
}

// readExpectations parses the fenced ```berth-expect block of a NOTES.md.
func readExpectations(path string) ([]expectation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []expectation
	in, seen := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimSpace(sc.Text())
		switch {
		case !in && l == "```berth-expect":
			if seen {
				return nil, fmt.Errorf("%s:%d: a second berth-expect block", path, n)
			}
			in, seen = true, true
			continue
		case in && l == "```":
			in = false
			continue
		case !in || l == "" || strings.HasPrefix(l, "#"):
			continue
		}
		body, src, ok := strings.Cut(l, "#")
		src = strings.TrimSpace(src)
		if !ok || src == "" {
			return nil, fmt.Errorf("%s:%d: %q names no source (\"# source\")", path, n, l)
		}
		fs := strings.Fields(body)
		if len(fs) != 3 {
			return nil, fmt.Errorf("%s:%d: %q: want \"platform verdict first-blocker  # source\" (a blank blocker is not allowed: write - for a ready platform)", path, n, l)
		}
		e := expectation{platform: fs[0], verdict: fs[1], blocker: fs[2], source: src, line: n}
		switch {
		case e.verdict != "ready" && e.verdict != "warn" && e.verdict != "no":
			return nil, fmt.Errorf("%s:%d: verdict %q: want ready, warn or no", path, n, e.verdict)
		case e.verdict == "no" && e.blocker == "-":
			return nil, fmt.Errorf("%s:%d: %s is not ready but names no first blocker", path, n, e.platform)
		case e.verdict != "no" && e.blocker != "-":
			return nil, fmt.Errorf("%s:%d: %s is %s but names blocker %q: write -", path, n, e.platform, e.verdict, e.blocker)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if in {
		return nil, fmt.Errorf("%s: berth-expect block is not closed", path)
	}
	if !seen {
		return nil, fmt.Errorf("%s: no ```berth-expect block under \"## Expected verdicts\"", path)
	}
	return out, nil
}

// TestFixtureVerdicts checks every fixture against the berth-expect block
// of its NOTES.md. The Kata runtime classes are evaluated for the
// fixture's own distribution; where that platform does not exist or is
// another shim there (on AKS, Cloud Hypervisor is clh-azure), the named
// one is used with the distribution check ignored.
func TestFixtureVerdicts(t *testing.T) {
	for _, name := range testhosts.Names(t) {
		t.Run(name, func(t *testing.T) {
			exps, err := readExpectations(filepath.Join(hostsDir, name, "NOTES.md"))
			if err != nil {
				t.Fatal(err)
			}
			have := map[string]bool{}
			for _, e := range exps {
				if have[e.platform] {
					t.Errorf("NOTES.md:%d: %s expected twice", e.line, e.platform)
				}
				have[e.platform] = true
			}
			for _, fam := range expectFamilies {
				if !have[fam] {
					t.Errorf("NOTES.md: no expectation for %s", fam)
				}
			}
			root, err := hostfs.OpenDir(filepath.Join(hostsDir, name))
			if err != nil {
				t.Fatal(err)
			}
			f := discover.Run(context.Background(), root, discover.Options{Now: func() time.Time { return time.Unix(0, 0) }})
			e, err := check.NewEvaluator(catalog.For(f))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range exps {
				p, err := platform.Parse(want.platform)
				if err != nil {
					t.Errorf("NOTES.md:%d: %v", want.line, err)
					continue
				}
				opt := check.Options{}
				s := p.Spec()
				if d, err := platform.ParseDistribution(f.Distribution.Name); err == nil {
					s.Distribution = d
				}
				// The same shim on the fixture's distribution; where that
				// is another shim (kata-clh on AKS would be AKS's
				// clh-azure) or no platform, the named one, with the
				// distribution check ignored.
				if q, err := platform.New(s); err == nil && q.Shim() == p.Shim() {
					p = q
				} else {
					opt.Ignore, _ = check.ParseIgnore([]string{"distribution.match"}, nil)
				}
				v := e.Evaluate(f, []platform.Platform{p}, opt)[0]
				okVerdict := map[string]bool{
					"ready": v.Status == check.Ready || v.Status == check.ReadyWithWarnings,
					"warn":  v.Status == check.ReadyWithWarnings,
					"no":    v.Status == check.NotReady,
				}[want.verdict]
				blocker := v.BlockedBy
				if blocker == "" {
					blocker = "-"
				}
				if !okVerdict || blocker != want.blocker {
					t.Errorf("NOTES.md:%d: %s (%s): %s blocked by %s, NOTES.md expects %s %s", want.line, want.platform, p, v.Status, blocker, want.verdict, want.blocker)
					for _, fd := range v.Findings {
						if fd.Status == check.Fail || fd.Status == check.Warn {
							t.Logf("  %s %s: %s", fd.Status, fd.ID, fd.Message)
						}
					}
				}
			}
		})
	}
}

// TestReadExpectations: the block parser refuses what would let an
// expectation go unchecked.
func TestReadExpectations(t *testing.T) {
	for _, tc := range []struct {
		name, body, err string
	}{
		{"ok", "```berth-expect\nkata-qemu ready - # NOTES\nkata-fc no snapshotter.available # containerd config\n```\n", ""},
		{"no block", "## Expected verdicts\n", "no ```berth-expect"},
		{"blank blocker", "```berth-expect\nkata-fc no # config\n```\n", "blank blocker"},
		{"no blocker for not ready", "```berth-expect\nkata-fc no - # config\n```\n", "names no first blocker"},
		{"blocker for ready", "```berth-expect\nkata-qemu ready kvm.module # x\n```\n", "write -"},
		{"no source", "```berth-expect\nkata-qemu ready -\n```\n", "names no source"},
		{"empty source", "```berth-expect\nkata-qemu ready - #  \n```\n", "names no source"},
		{"bad verdict", "```berth-expect\nkata-qemu maybe - # x\n```\n", "want ready, warn or no"},
		{"unclosed", "```berth-expect\nkata-qemu ready - # x\n", "not closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "NOTES.md")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := readExpectations(p)
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("err = %v, want one containing %q", err, tc.err)
			}
		})
	}
}
