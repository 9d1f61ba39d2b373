package discover

import (
	"context"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

func TestParseOSRelease(t *testing.T) {
	kv, err := parseOSRelease([]byte("# comment\nNAME=\"Ubuntu\"\nVERSION_ID='24.04'\nID=ubuntu\nPRETTY_NAME=\"Ubuntu 24.04 \\\"Noble\\\"\"\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	if kv["ID"] != "ubuntu" || kv["VERSION_ID"] != "24.04" || kv["PRETTY_NAME"] != `Ubuntu 24.04 "Noble"` {
		t.Errorf("got %v", kv)
	}
	for _, bad := range []string{"ID=\"open\n", "just words\n", "X=a b\n"} {
		if _, err := parseOSRelease([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("parseOSRelease(%q) = %v", bad, err)
		}
	}
}

func TestRunOSReleaseFallback(t *testing.T) {
	f, u := runSub(t, coreRoot(t, map[string]string{"usr/lib/os-release": "ID=debian\nVERSION_ID=\"12\"\n"}), runOSRelease)
	if f.OS.ID != "debian" || f.OS.VersionID != "12" || len(u) != 0 {
		t.Errorf("os %+v unknown %v", f.OS, u)
	}
	f, u = runSub(t, coreRoot(t, map[string]string{"etc/os-release": "ID=x\nbroken\n"}), runOSRelease)
	if f.OS.ID != "" || !strings.Contains(u["os"], "etc/os-release:2") {
		t.Errorf("os %+v unknown %v", f.OS, u)
	}
}

func FuzzParseOSRelease(f *testing.F) {
	f.Add([]byte("NAME=\"Debian GNU/Linux\"\nID=debian\nVERSION_ID='12'\n"))
	f.Fuzz(func(t *testing.T, b []byte) { parseOSRelease(b) })
}

// TestOSReleaseAbsoluteSymlink: etc/os-release -> /usr/lib/os-release, as
// on most distributions, is the root's own file, on an offline directory
// root and on a live root mounted elsewhere (the DaemonSet's /host), never
// the one of the machine berth runs on (Debian 12 on the build machine).
// Discovery runs whole, as `berth facts --root` does.
func TestOSReleaseAbsoluteSymlink(t *testing.T) {
	const ubuntu = "PRETTY_NAME=\"Ubuntu 24.04.3 LTS\"\nID=ubuntu\nVERSION_ID=\"24.04\"\n"
	dir := coreRoot(t, map[string]string{
		"usr/lib/os-release": ubuntu,
		"etc/os-release":     "->/usr/lib/os-release",
	}).Path()
	live, err := hostfs.NewLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	off, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []hostfs.Root{off, live} {
		f := Run(context.Background(), root, Options{Now: fixedNow})
		want := facts.OS{ID: "ubuntu", VersionID: "24.04", PrettyName: "Ubuntu 24.04.3 LTS"}
		if f.OS != want {
			t.Errorf("live=%v: OS = %+v, want the root's %+v", root.Live(), f.OS, want)
		}
		if r, ok := f.UnknownReason("os"); ok {
			t.Errorf("live=%v: os unknown: %s", root.Live(), r)
		}
	}
}

// TestOSReleaseCap: os-release is read with its own cap.
func TestOSReleaseCap(t *testing.T) {
	root := coreRoot(t, map[string]string{"etc/os-release": "ID=x\n" + strings.Repeat("#\n", maxOSRelease)})
	f, unknown := runSub(t, root, runOSRelease)
	if r := unknown["os"]; !strings.HasPrefix(r, "larger than 65536 bytes: etc/os-release") || f.OS.ID != "" {
		t.Errorf("os unknown with %q (OS %+v), want larger than 65536 bytes", r, f.OS)
	}
}
