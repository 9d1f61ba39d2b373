package pciids

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestHex4 checks every byte value in every lane against the byte-wise
// rule of the line reader before (refIsHex4 and lower-casing A-F).
func TestHex4(t *testing.T) {
	for lane := range 4 {
		for c := range 256 {
			b := []byte("0a9F")
			b[lane] = byte(c)
			got, ok := hex4(b)
			wantOK := refIsHex4(b)
			if ok != wantOK {
				t.Fatalf("hex4(%q) ok = %v, want %v", b, ok, wantOK)
			}
			if !ok {
				continue
			}
			id, err := refEntryID(b)
			if err != nil || got != word(string(id[:])) {
				t.Fatalf("hex4(%q) = %08x, want %q", b, got, id)
			}
		}
	}
}

// TestIDSet checks that an idSet has what was added to it and, as a
// filter should, little else.
func TestIDSet(t *testing.T) {
	var f idSet
	rng := rand.New(rand.NewPCG(1, 2))
	added := map[uint32]bool{}
	for range 12 {
		id := rng.Uint32()
		f.add(id)
		added[id] = true
	}
	wrong := 0
	for range 10000 {
		id := rng.Uint32()
		if f.has(id) && !added[id] {
			wrong++
		}
	}
	for id := range added {
		if !f.has(id) {
			t.Errorf("%08x added but not had", id)
		}
	}
	if wrong > 1000 {
		t.Errorf("%d of 10000 ids not added pass the filter", wrong)
	}
}

// scanModel is scanAVX2's rule written plainly: for the positions
// [0, n) it returns the entries a scan records and the last line passed.
func scanModel(b []byte, n int, dev bool, filter *idSet) (entries []entry, passed int) {
	passed = -1
	lines := 0
	for j := range n {
		if b[j] != '\n' {
			continue
		}
		c1, c2 := b[j+1], b[j+2]
		record := false
		switch {
		case c1 == '#' || c1 == '\n':
			// a comment or an empty line: passed
		case !dev && c1 == '\t', dev && c1 == '\t' && c2 == '\t':
			lines++
			continue // not looked at
		case dev && c1 != '\t':
			record = true
		default:
			id := j + 1
			if dev {
				id = j + 2
			}
			if id+4 > len(b) {
				record = true
			} else if x, ok := hex4(b[id:]); !ok || filter.has(x) {
				record = true
			}
		}
		if record {
			entries = append(entries, entry{uint32(j), uint32(lines)})
		} else {
			passed = j
		}
		lines++
	}
	return entries, passed
}

// TestScanAVX2 holds the vector scan to scanModel on random text made of
// the bytes that matter, and to its stopping rules.
func TestScanAVX2(t *testing.T) {
	if !hasAVX2() {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	// The hex digits, the bytes just outside their ranges, and the bytes
	// the scan looks for.
	alphabet := []byte("\n\n\t\t\t#0123456789abcdefABCDEF/:@G`g \r\x80\xff")
	var out [batchCap]entry
	for round := range 20000 {
		// Hex digits after the text: a scan that reads past it would
		// take them for an id.
		size := rng.IntN(700)
		if round%4 == 1 {
			size = 64*(1+rng.IntN(8)) + 2 + rng.IntN(6) // ending in the last step judged
		}
		buf := make([]byte, size+8)
		copy(buf[size:], "00000000")
		b := buf[:size]
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if round%4 == 1 && size >= 8 {
			// A line start near the end, whose id would run past it.
			starts := []string{"\n\t", "\n\t0", "\n\t00", "\n0", "\n00", "\n000"}
			start := starts[rng.IntN(len(starts))]
			copy(b[size-len(start)-rng.IntN(8-len(start)):], start)
		}
		if round%2 == 0 {
			// Mostly tab lines, as in the real file.
			for i := range b {
				if b[i] == '\n' && i+1 < len(b) && rng.IntN(8) != 0 {
					b[i+1] = '\t'
				}
			}
		}
		var filter idSet
		for range rng.IntN(4) {
			x, _ := hex4([]byte{alphabet[6+rng.IntN(22)], alphabet[6+rng.IntN(22)], alphabet[6+rng.IntN(22)], alphabet[6+rng.IntN(22)]})
			filter.add(x)
		}
		if rng.IntN(4) == 0 {
			filter.add(word("0000")) // what lies past the text
		}
		dev := rng.IntN(2) == 0
		n, lines, count, passed := scanAVX2(b, dev, &filter, &out)
		if len(b) < vectorMin {
			if n != 0 || lines != 0 || count != 0 || passed != -1 {
				t.Fatalf("short text: %d %d %d %d", n, lines, count, passed)
			}
			continue
		}
		if n%64 != 0 || n > len(b)-2 {
			t.Fatalf("n = %d for %d bytes", n, len(b))
		}
		wantEntries, wantPassed := scanModel(b, n, dev, &filter)
		if count != len(wantEntries) || passed != wantPassed || lines != bytes.Count(b[:n], []byte{'\n'}) {
			t.Fatalf("dev %v, %q:\ngot %d entries, passed %d, %d lines; want %d, %d, %d", dev, b, count, passed, lines, len(wantEntries), wantPassed, bytes.Count(b[:n], []byte{'\n'}))
		}
		for i, e := range wantEntries {
			if out[i] != e {
				t.Fatalf("dev %v, %q: entry %d = %v, want %v", dev, b, i, out[i], e)
			}
		}
		// It stops only where its rules say.
		if n+vectorMin <= len(b) && count <= batchCap-64 {
			stop := count > 0 && !dev
			for _, e := range wantEntries {
				if int(e.pos) >= n-64 && b[e.pos+1] != '\t' {
					stop = true
				}
			}
			if !stop {
				t.Fatalf("dev %v, %q: stopped at %d of %d with %d entries", dev, b, n, len(b), count)
			}
		}
	}
}

// TestResolveLongLines checks the lines of 64 KiB and more: an error
// where the line-by-line reading gave one for a line Resolve still looks
// at, none for the lines it passes over (see the package doc).
func TestResolveLongLines(t *testing.T) {
	long := strings.Repeat("x", maxLine)
	head := "0001  First\n\t0001  d\n"
	for _, tt := range []struct {
		name, text string
		dropped    bool // the reference's error is one Resolve no longer gives
	}{
		{"wanted vendor", head + "10de  " + long + "\n\t2330  GH100\n", false},
		{"other vendor", head + "10dd  " + long + "\n10de  N\n\t2330  GH100\n", false},
		{"wanted device", head + "10de  N\n\t2330  " + long + "\n", false},
		{"other device of a wanted vendor", head + "10de  N\n\t2331  " + long + "\n\t2330  GH100\n", false},
		{"other device after a wanted one", head + "10de  N\n\t2330  GH100\n\t2331  " + long + "\n", false},
		{"other vendor after a wanted device", head + "10de  N\n\t2330  GH100\n10df  " + long + "\n", false},
		{"comment", head + "# " + long + "\n10de  N\n\t2330  GH100\n", false},
		{"comment in a block", head + "10de  N\n# " + long + "\n\t2330  GH100\n", false},
		{"class", head + "10de  N\n\t2330  GH100\nC " + long + "\n", false},
		{"last line", head + "10de  N\n\t2330  GH100\n\t2331  " + long, false},
		{"just fits", head + "10de  N\n\t2330  " + long[:maxLine-8] + "\n", false},
		{"subsystem of a wanted vendor", head + "10de  N\n\t2331  D\n\t\t10de 0001  " + long + "\n\t2330  GH100\n", true},
		{"device of another vendor", head + "0002  S\n\t0001  " + long + "\n10de  N\n\t2330  GH100\n", true},
		{"subsystem of another vendor", head + "\t\t0001 0001  " + long + "\n10de  N\n\t2330  GH100\n", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := []ID{{"10de", "2330"}, {"ffff", "0000"}}
			_, refErr := refResolve(strings.NewReader(tt.text), want)
			if tt.dropped {
				if refErr == nil || !strings.Contains(refErr.Error(), "token too long") {
					t.Fatalf("reference error %v, want a line too long", refErr)
				}
				for _, vector := range []bool{false, true} {
					got, err := resolve(strings.NewReader(tt.text), want, vector)
					if err != nil || got.Device(ID{"10de", "2330"}) != "GH100" {
						t.Errorf("vector %v: %v, %v; want GH100 and no error", vector, got, err)
					}
				}
				return
			}
			for _, kind := range readerKinds {
				compare(t, []byte(tt.text), want, kind, 7)
			}
		})
	}
}

// TestResolveEdges runs the texts whose ends and line ends are unusual
// past Resolve and the reference.
func TestResolveEdges(t *testing.T) {
	want := []ID{{"10de", "2330"}, {"10DE", "2331"}, {"8086", "abcd"}, {"ab", "cd"}, {"zzzz", "0000"}}
	texts := []string{
		"",
		"\n",
		"\t",
		"10de",
		"10de  N",
		"10de  N\n\t",
		"10de  N\n\t2330",
		"10de  N\n\t2330  D",
		"10de  N\n\t2330  D\n",
		"10de  N\r\n\t2330  D\r\n\t\r\n",
		"10de  N\n\t\t\n\t2330\r",
		"10DE  N\n\t2330  D\n\t2331  E\n8086  I\n\tABCD  X\n",
		"10de  N\n#\n\n\t2330  D\n8086\n\tabcd",
		"10de  N\n10de  M\n\t2330  D\n",
		"10de  N\n\t2330  D\n8086  I\n10de  M\n\t2331  E\n",
		"8086  I\n10de  N\n\t2330  D\n\tabcd  X\n",
		"10de  N\n\t23301\n\t2330  D\nC 00  U\n\t2331  E\n",
		"C 00  U\n10de  N\n",
		"C\n10de  N\n",
		"\r\n10de  N\n\t2330  D",
		"1\n10de  N\n",
		"10de  N\n\t2330  D\n1\n",
		"10de  N\n\tzz\n",
		"10de  N\n\t2330  D\n\t\t\t\n\t233",
		// Wanted vendors one after the other: a batch scanned for one
		// block must not be used for the next.
		"10de  N\n\t2330  D\n8086  I\n\tabcd  X\n",
		"8086  I\n\tabcd  X\n10de  N\n\t2330  D\n\t2331  E\n",
		"10de  N\n\tabcd  D\n8086  I\n\t2330  X\n\tabcd  Y\n",
	}
	for _, text := range texts {
		for _, kind := range readerKinds {
			for seed := range uint64(3) {
				compare(t, []byte(text), want, kind, seed)
			}
		}
		// The same text among lines enough for the vector scan, at
		// every offset in its steps.
		pad := strings.Repeat("0001  P\n\t0001  D\n\t\t0001 0001  S\n", 3)
		for i := range 70 {
			compare(t, []byte(pad[:i]+"\n"+text), want, "bytes", 0)
			compare(t, []byte(pad+pad[:i]+"\n"+text), want, "chunks", uint64(i))
			compare(t, []byte(pad[:i]+"\n"+text+"\n"+pad+pad), want, "bytes", 0)
		}
	}
}
