package discover

import (
	"strings"
	"testing"
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
