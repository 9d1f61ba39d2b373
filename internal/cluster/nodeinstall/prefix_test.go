package nodeinstall

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit/treetest"
)

// TestPrefixLeavesNothingBehind makes a prefix as an install run does
// (makePrefix, killed or not), then cleans up as cleanup mode does
// (removePrefix), and checks that the host root is as it was: every
// directory the installer made goes, whether its parents existed (the
// prefix of a side-by-side release, /opt/berth-blue beside /opt/berth)
// or not, whether the run was killed while it made the prefix, and when
// the prefix is emptied only after a first cleanup (configure's
// directories under it, which the last configuration change on the host
// removes, in another install's run).
func TestPrefixLeavesNothingBehind(t *testing.T) {
	errKilled := errors.New("killed")
	for _, tc := range []struct {
		name     string
		existing []string
		prefix   string
		// killed kills the run once the prefix's directories and their
		// record exist, before they are in place.
		killed bool
		// rerun runs the install again after the kill.
		rerun bool
		// later is left in the prefix by the first cleanup and removed
		// by another run before a second cleanup.
		later string
	}{
		{name: "parents missing", prefix: "/opt/berth"},
		{name: "parent exists", existing: []string{"opt"}, prefix: "/opt/berth-blue"},
		{name: "parents missing, killed", prefix: "/opt/berth", killed: true},
		{name: "parent exists, killed", existing: []string{"opt"}, prefix: "/opt/berth-blue", killed: true},
		{name: "deep, killed, run again", existing: []string{"srv"}, prefix: "/srv/a/b/berth", killed: true, rerun: true},
		{name: "parent exists, emptied later", existing: []string{"opt"}, prefix: "/opt/berth-blue", later: "etc/kata"},
		{name: "parents missing, emptied later", prefix: "/opt/berth", later: "etc/kata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			for _, d := range tc.existing {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			before := treetest.Content(t, root)
			w := writable(t, root)
			log := slog.New(slog.DiscardHandler)
			dir := filepath.Join(root, tc.prefix)

			var kill func() error
			if tc.killed {
				kill = func() error { return errKilled }
			}
			if err := buildPrefix(w, tc.prefix, kill); !errors.Is(err, kill0(tc.killed, errKilled)) {
				t.Fatalf("making the prefix: %v", err)
			}
			if tc.killed {
				// Never the prefix without its record.
				if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("the killed run left %s (%v)", tc.prefix, err)
				}
			}
			if !tc.killed || tc.rerun {
				if err := makePrefix(w, tc.prefix); err != nil {
					t.Fatalf("making the prefix: %v", err)
				}
				if _, err := os.Stat(filepath.Join(dir, createdFile)); err != nil {
					t.Fatalf("the prefix %s made without its record: %v", tc.prefix, err)
				}
				if tree := treetest.Content(t, root); strings.Contains(tree, newSuffix) {
					t.Fatalf("a temporary directory is left:\n%s", tree)
				}
				// What install.Installer leaves besides the installation,
				// which it also creates when the prefix is not there.
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, ".lock"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if tc.later != "" {
					if err := os.MkdirAll(filepath.Join(dir, tc.later), 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}

			if _, err := removePrefix(ctx, w, tc.prefix, log); err != nil {
				t.Fatalf("cleanup: %v", err)
			}
			if tc.later != "" {
				// The prefix is not empty yet: it keeps its record.
				if _, err := os.Stat(filepath.Join(dir, createdFile)); err != nil {
					t.Fatalf("cleanup removed the record of %s, which it could not remove yet: %v", tc.prefix, err)
				}
				if err := os.RemoveAll(filepath.Join(dir, strings.Split(tc.later, "/")[0])); err != nil {
					t.Fatal(err)
				}
				if _, err := removePrefix(ctx, w, tc.prefix, log); err != nil {
					t.Fatalf("second cleanup: %v", err)
				}
			}
			if after := treetest.Content(t, root); after != before {
				t.Errorf("the host root after cleanup:\n%s\nwant as before:\n%s", after, before)
			}
		})
	}
}

// kill0 is the error buildPrefix returns: errKilled when killed.
func kill0(killed bool, errKilled error) error {
	if killed {
		return errKilled
	}
	return nil
}
