package discover

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// FuzzScanDpkgStatus: the status file is host input. The scan must not
// panic, must return only wanted, versioned packages, and upstreamVersion
// must give a dotted version or nothing for any of them.
func FuzzScanDpkgStatus(f *testing.F) {
	wanted := map[string]bool{"containerd": true, "qemu-system-x86": true, "virtiofsd": true, "cri-o": true}
	f.Fuzz(func(t *testing.T, data []byte) {
		pkgs, err := scanDpkgStatus(bytes.NewReader(data), wanted)
		if err != nil {
			return
		}
		for name, list := range pkgs {
			if !wanted[name] || len(list) == 0 {
				t.Fatalf("unwanted or empty entry %q: %+v", name, list)
			}
			for _, p := range list {
				if p.Name != name || p.Version == "" {
					t.Fatalf("bad package under %q: %+v", name, p)
				}
				if v, ok := upstreamVersion(p.Version); ok != (v != "") || (ok && !versionShape.MatchString(v)) {
					t.Fatalf("upstreamVersion(%q) = %q, %v", p.Version, v, ok)
				}
			}
		}
	})
}

// FuzzListContains: a .list file is host input; the answer must be that of
// a plain line-by-line comparison.
func FuzzListContains(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, path string) {
		got, err := listContains(bytes.NewReader(data), []string{path})
		if err != nil {
			return
		}
		want := false
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 64<<10)
		for sc.Scan() {
			want = want || sc.Text() == path
		}
		if got != want {
			t.Fatalf("listContains = %v, line comparison %v", got, want)
		}
	})
}

// FuzzMarkerVersion: read-only data of a host binary is untrusted. A
// version found after a marker is dotted numbers taken from the data, and
// the vendor is text of the data too.
func FuzzMarkerVersion(f *testing.F) {
	markers := []struct {
		marker string
		parse  versionParser
	}{
		{"QEMU emulator version ", parseQEMUVersion},
		{"virtiofsd version ", parseVirtiofsdVersion},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range markers {
			v, vendor, ok := markerVersion(data, m.marker, m.parse)
			if ok != (v != "") {
				t.Fatalf("%q: ok=%v with version %q", m.marker, ok, v)
			}
			if !ok {
				continue
			}
			if !versionShape.MatchString(v) || !bytes.Contains(data, []byte(v)) {
				t.Fatalf("%q: version %q is not dotted numbers from the data", m.marker, v)
			}
			if strings.ContainsAny(vendor, "\x00\n") || !bytes.Contains(data, []byte(vendor)) {
				t.Fatalf("%q: vendor %q is not one line of the data", m.marker, vendor)
			}
		}
	})
}
