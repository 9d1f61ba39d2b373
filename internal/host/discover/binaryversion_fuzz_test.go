package discover

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
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

// FuzzScanDpkgStatusWindow: reading the status file through a window of
// any size, in reads of any length, gives what parsing the whole file at
// once gives (parseDpkgStatusWhole), error messages included.
func FuzzScanDpkgStatusWindow(f *testing.F) {
	wanted := map[string]bool{"containerd": true, "qemu-system-x86": true, "virtiofsd": true, "cri-o": true}
	for _, seed := range []string{
		sampleStatus,
		"Package: containerd\nStatus: install ok installed\nVersion: 1.7.0-1",
		"Package: a\nVersion: 1\nPackage: containerd\n",
		"Package: containerd\ngarbage line\n",
		"\n\n\nPackage: cri-o\n\n\nPackage:virtiofsd\nVersion: 1.10.1-1\nStatus: x ok installed",
		"Status: install ok installed\nPackage: containerd\nVersion: 1.6.20~ds1-1\n\nPackage: x\n",
	} {
		f.Add([]byte(seed), uint8(7), false)
	}
	f.Add([]byte(sampleStatus), uint8(1), true)
	f.Fuzz(func(t *testing.T, data []byte, size uint8, oneByte bool) {
		want, wantErr := parseDpkgStatusWhole(data, wanted)
		var r io.Reader = bytes.NewReader(data)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		got, err := scanDpkgStatusBuffer(r, wanted, int(size))
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("error %v, whole file %v", err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("got %+v, whole file %+v", got, want)
		}
	})
}

// parseDpkgStatusWhole is the status file parse over the whole content
// in memory, as berth did before reading through a window: the reference
// for FuzzScanDpkgStatusWindow.
func parseDpkgStatusWhole(data []byte, wanted map[string]bool) (map[string][]dpkgPackage, error) {
	const field = "Package:"
	// lineAt numbers the line at offset off, for errors only.
	lineAt := func(off int) int { return bytes.Count(data[:off], []byte("\n")) + 1 }
	out := map[string][]dpkgPackage{}
	prev, prevName := -1, "" // the previous Package field
	for off := 0; ; {
		at := -1
		if off == 0 && bytes.HasPrefix(data, []byte(field)) {
			at = 0
		} else if i := bytes.Index(data[off:], []byte("\n"+field)); i >= 0 {
			at = off + i + 1
		}
		if at < 0 {
			break
		}
		name := data[at+len(field):]
		if i := bytes.IndexByte(name, '\n'); i >= 0 {
			name = name[:i]
		}
		name = bytes.TrimSpace(name)
		// The stanza starts after the last blank line before the field:
		// right before it in every file dpkg writes.
		start := at
		if at >= 2 && data[at-2] != '\n' {
			start = 0
			if i := bytes.LastIndex(data[:at], []byte("\n\n")); i >= 0 {
				start = i + 2
			}
			if prev >= start {
				return nil, fmt.Errorf("line %d: Package field in the middle of stanza %q (expected a blank line between stanzas)", lineAt(at), prevName)
			}
		}
		prev, prevName = at, string(name)
		off = at + len(field)
		if !wanted[string(name)] {
			continue
		}
		end := len(data)
		if i := bytes.Index(data[at:], []byte("\n\n")); i >= 0 {
			end = at + i + 1
		}
		p, installed, bad, err := parseStanza(data[start:end])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineAt(start+bad), err)
		}
		if installed && p.Name != "" && p.Version != "" {
			out[p.Name] = append(out[p.Name], p)
		}
	}
	return out, nil
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
