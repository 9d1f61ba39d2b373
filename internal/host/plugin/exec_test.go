package plugin

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/testkit/testproc"
)

const goodOutput = `{"schemaVersion":1,"facts":{"site.example.com/attestation-url":"https://kbs.example:8080"},"findings":[{"id":"site.attestation.reachable","status":"pass","title":"Attestation service reachable","message":"kbs.example:8080 answered"}]}`

// hostile are the plug-ins of the test host. Each sleeping plug-in sleeps
// for an odd number of seconds that marks its processes in /proc.
var hostile = map[string]string{
	"10-good":      "echo '" + goodOutput + "'",
	"20-sleeps":    "sleep 7777.001",
	"30-floods":    "head -c 100000000 /dev/zero",
	"40-forks":     "(sleep 7777.002 &) ; echo '{\"schemaVersion\":1}'",
	"50-badjson":   `echo '{"schemaVersion":1,"facts":{"a":"b"},}'`,
	"60-exit3":     "echo 'cannot reach kbs' >&2; exit 3",
	"70-badstatus": `echo '{"schemaVersion":1,"findings":[{"id":"site.x.ok","status":"pass","title":"ok"},{"id":"site.x.bad","status":"maybe","title":"bad"}]}'`,
	"80-env":       `printf '{"schemaVersion":1,"facts":{"env":"%s"}}' "$(env | sort | tr '\n' ' ' | sed 's/ *$//')"`,
}

func writeScript(t *testing.T, p, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // umask must not weaken the test
		t.Fatal(err)
	}
}

// hostileRoot builds a host root with the hostile plug-ins and returns the
// checks directory.
func hostileRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, ChecksDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range hostile {
		writeScript(t, filepath.Join(dir, name), body, 0o755)
	}
	writeScript(t, filepath.Join(dir, "90-worldwritable"), "echo '{\"schemaVersion\":1}'", 0o777)
	outside := filepath.Join(root, "outside")
	writeScript(t, outside, "echo '{\"schemaVersion\":1}'", 0o755)
	if err := os.Symlink(outside, filepath.Join(dir, "95-symlink-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("10-good", filepath.Join(dir, "96-symlink-in")); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(dir, "97-notexec"), "true", 0o644)
	writeScript(t, filepath.Join(dir, ".hidden"), "exit 1", 0o755)
	return dir
}

func TestRunChecksHostile(t *testing.T) {
	dir := hostileRoot(t)
	start := time.Now()
	// The timeout is long enough for every well-behaved plug-in on a
	// loaded machine; the bound only shows that nothing waited for the
	// two-hour sleeps.
	results, err := RunChecks(context.Background(), dir, Options{Timeout: 3 * time.Second})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took > time.Minute {
		t.Errorf("RunChecks took %s with a 3s timeout: it waited for a sleeping plug-in", took)
	}
	t.Logf("RunChecks took %s", took)

	want := map[string]string{ // name -> error substring, "" for none
		"10-good":          "",
		"20-sleeps":        "timed out after 3s",
		"30-floods":        "stdout exceeds 1048576 bytes: killed",
		"40-forks":         "",
		"50-badjson":       "invalid JSON output at byte offset 38",
		"60-exit3":         "exited with status 3: cannot reach kbs",
		"70-badstatus":     `finding 1: id site.x.bad: invalid status "maybe"`,
		"80-env":           "",
		"90-worldwritable": "is group- or world-writable (mode -rwxrwxrwx)",
		"95-symlink-out":   "leaves the directory",
		"96-symlink-in":    "",
		"97-notexec":       "is not executable",
	}
	got := map[string]Result{}
	var order []string
	for _, r := range results {
		got[r.Name] = r
		order = append(order, r.Name)
	}
	if len(results) != len(want) {
		t.Errorf("results for %v, want %d entries", order, len(want))
	}
	for name, wantErr := range want {
		r, ok := got[name]
		if !ok {
			t.Errorf("%s: no result", name)
			continue
		}
		switch {
		case wantErr == "" && r.Err != nil:
			t.Errorf("%s: unexpected error %v", name, r.Err)
		case wantErr != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), wantErr)):
			t.Errorf("%s: err=%v, want one containing %q", name, r.Err, wantErr)
		}
		if r.PGID != 0 {
			groupGone(t, name, r.PGID)
		}
	}
	if testproc.MarkerAlive(t, "7777.00") {
		t.Errorf("a process of a sleeping plug-in survived")
	}

	good := got["10-good"].Output
	if good.Facts["site.example.com/attestation-url"] != "https://kbs.example:8080" ||
		len(good.Findings) != 1 || good.Findings[0].ID != "site.attestation.reachable" || good.Findings[0].Status != "pass" {
		t.Errorf("10-good output %+v", good)
	}
	if o := got["70-badstatus"].Output; len(o.Findings) != 1 || o.Findings[0].ID != "site.x.ok" {
		t.Errorf("70-badstatus kept %+v, want only site.x.ok", o.Findings)
	}
	if env := got["80-env"].Output.Facts["env"]; env != "LANG=C PATH=/usr/sbin:/usr/bin:/sbin:/bin PWD=/" {
		t.Errorf("environment of a check: %q", env)
	}
}

// liveMembers lists the processes of group pgid that are not zombies,
// from /proc/<pid>/stat (state and pgrp follow the command name).
func liveMembers(t *testing.T, pgid int) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			live = append(live, e.Name()+" "+s[:strings.LastIndexByte(s, ')')+1])
		}
	}
	return live
}

// groupGone fails if a process of group pgid is still running when
// RunChecks has returned, or if the group does not vanish soon: killed
// orphans are reaped by init, which may take a moment.
func groupGone(t *testing.T, name string, pgid int) {
	t.Helper()
	if live := liveMembers(t, pgid); len(live) > 0 {
		t.Errorf("%s: processes of group %d still running: %v", name, pgid, live)
	}
	if err := testproc.WaitGroupGone(pgid, 3*time.Second); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

func TestRunChecksUnsafeDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checks.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(dir, "ok"), "echo '{\"schemaVersion\":1}'", 0o755)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	res, err := RunChecks(context.Background(), dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "refusing to run any check") || res != nil {
		t.Fatalf("res=%v err=%v, want the directory refused", res, err)
	}
}

func TestRunChecksMissingDirectory(t *testing.T) {
	res, err := RunChecks(context.Background(), filepath.Join(t.TempDir(), "none"), Options{})
	if res != nil || err != nil {
		t.Fatalf("res=%v err=%v, want nothing", res, err)
	}
}

func TestRunChecksParallelBound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "checks.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c", "d"} {
		writeScript(t, filepath.Join(dir, n), "sleep 0.2; echo '{\"schemaVersion\":1}'", 0o755)
	}
	start := time.Now()
	res, err := RunChecks(context.Background(), dir, Options{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Errorf("%s: %v", r.Name, r.Err)
		}
	}
	// Two at a time: at least two rounds of 200 ms. Only the lower bound
	// is the limit's; an upper one would measure the machine.
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Errorf("4 checks of 200ms with Parallel 2 took %s, want at least 400ms", took)
	}
}

func TestRunChecksUnsafeAncestor(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "berth", "checks.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, filepath.Join(dir, "ok"), "echo '{\"schemaVersion\":1}'", 0o755)
	// A safe directory elsewhere, reached through a symlink: allowed.
	link := filepath.Join(root, "etc", "checks-link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if res, err := RunChecks(context.Background(), link, Options{}); err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("through a safe symlink: res=%+v err=%v", res, err)
	}
	// Anyone could replace etc/berth/checks.d when etc/berth is
	// world-writable without the sticky bit.
	if err := os.Chmod(filepath.Dir(dir), 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, link} {
		res, err := RunChecks(context.Background(), p, Options{})
		if err == nil || !strings.Contains(err.Error(), "berth is group- or world-writable") || res != nil {
			t.Errorf("%s: res=%v err=%v, want refused for the writable parent", p, res, err)
		}
	}
	// Sticky like /tmp: others cannot replace what they do not own.
	if err := os.Chmod(filepath.Dir(dir), os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := RunChecks(context.Background(), dir, Options{}); err != nil {
		t.Errorf("sticky parent: %v", err)
	}
}
