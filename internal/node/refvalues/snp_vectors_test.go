package refvalues

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// readPSV returns the data rows of a pipe-separated vector file: comments
// and blank lines dropped, each row checked for the expected field count.
func readPSV(t *testing.T, name string, fields int) [][]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "|")
		if len(f) != fields && !(len(f) == 3 && f[0] == "OVMF-ONLY") {
			t.Fatalf("%s:%d: %d fields, expected %d", name, n, len(f), fields)
		}
		rows = append(rows, f)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no vectors", name)
	}
	return rows
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSNPVectors(t *testing.T) {
	o, err := ParseOVMF(readTestdata(t, "OVMF.amdsev.fd"))
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range readPSV(t, "vectors-snp.psv", 8) {
		t.Run(row[0], func(t *testing.T) {
			if row[0] == "OVMF-ONLY" {
				if got := FirmwareDigest(o).String(); got != row[2] {
					t.Errorf("firmware digest = %s, want %s", got, row[2])
				}
				return
			}
			var hashes *SEVHashes
			if row[1] != "-" {
				k := bytes.NewReader(readTestdata(t, row[1]))
				var initrd *bytes.Reader
				if row[2] != "-" {
					initrd = bytes.NewReader(readTestdata(t, row[2]))
				}
				cmdline := row[3]
				if cmdline == "-" {
					cmdline = ""
				}
				var h SEVHashes
				if initrd != nil {
					h, err = HashComponents(k, initrd, cmdline)
				} else {
					h, err = HashComponents(k, nil, cmdline)
				}
				if err != nil {
					t.Fatal(err)
				}
				hashes = &h
			}
			n, err := strconv.Atoi(row[4])
			if err != nil {
				t.Fatal(err)
			}
			vt, err := ParseVCPUType(row[5])
			if err != nil {
				t.Fatal(err)
			}
			gf, ok := parseHex(row[6])
			if !ok {
				t.Fatalf("bad guest features %q", row[6])
			}
			p, err := MeasureSNP(o, hashes)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := p.LaunchDigests(vt, gf, VMMQEMU, n)
			if err != nil {
				t.Fatal(err)
			}
			if got := ds[n-1].String(); got != row[7] {
				t.Errorf("launch digest = %s, want %s", got, row[7])
			}
		})
	}
}
