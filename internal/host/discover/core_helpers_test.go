package discover

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// fixedNow is the clock of every core test.
func fixedNow() time.Time { return time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC) }

// coreRoot writes files (path -> content; a value starting with "->" is a
// symlink) under a temp dir and opens it offline.
func coreRoot(t testing.TB, files map[string]string) *hostfs.Dir {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if len(c) > 2 && c[:2] == "->" {
			err = os.Symlink(c[2:], full)
		} else {
			err = os.WriteFile(full, []byte(c), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runSub runs one subsystem on root and returns the facts and unknowns.
func runSub(t testing.TB, root hostfs.Root, run func(context.Context, *session, *facts.Facts)) (*facts.Facts, map[string]string) {
	t.Helper()
	s := &session{root: root, opt: Options{Now: fixedNow}}
	f := &facts.Facts{}
	run(context.Background(), s, f)
	u := map[string]string{}
	for _, m := range s.unknown {
		u[m.Field] = m.Reason
	}
	return f, u
}

func intp(n int) *int { return &n }
