package pciids

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

// systemDB is the distribution's pci.ids, which the tests and benchmarks
// that need a real database read.
const systemDB = "/usr/share/misc/pci.ids"

var loadDB = sync.OnceValues(func() ([]byte, error) { return os.ReadFile(systemDB) })

func readDB(tb testing.TB) []byte {
	tb.Helper()
	data, err := loadDB()
	if err != nil {
		tb.Fatalf("%v (install the Debian package pci.ids: make tools)", err)
	}
	return data
}

// dbIDs are the vendor and device ids of a database, as written.
type dbIDs struct {
	vendors []string
	devices []ID
}

var loadDBIDs = sync.OnceValue(func() dbIDs {
	data, err := loadDB()
	if err != nil {
		return dbIDs{}
	}
	return idsIn(data)
})

// idsIn lists the vendor lines' ids of data and the ids of the device
// lines under them, without judging the lines any further.
func idsIn(data []byte) dbIDs {
	var ids dbIDs
	vendor := ""
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		switch {
		case len(line) >= 4 && line[0] != '\t' && line[0] != '#' && line[0] != 'C':
			vendor = string(line[:4])
			ids.vendors = append(ids.vendors, vendor)
		case len(line) >= 5 && line[0] == '\t' && line[1] != '\t' && vendor != "":
			ids.devices = append(ids.devices, ID{vendor, string(line[1:5])})
		}
	}
	return ids
}

// readerKind names how compare hands the text to Resolve: whole, or in
// pieces that put the buffer's edges everywhere.
var readerKinds = []string{"bytes", "onebyte", "half", "dataerr", "chunks", "fail"}

// newReader returns data behind the reader of kind k; seed shapes the
// pieces of "chunks" and where "fail" fails.
func newReader(k string, data []byte, seed uint64) io.Reader {
	switch k {
	case "onebyte":
		return iotest.OneByteReader(bytes.NewReader(data))
	case "half":
		return iotest.HalfReader(bytes.NewReader(data))
	case "dataerr":
		return iotest.DataErrReader(bytes.NewReader(data))
	case "chunks":
		return &chunkReader{data: data, rng: rand.New(rand.NewPCG(seed, 1))}
	case "fail":
		at := 0
		if len(data) > 0 {
			at = int(seed % uint64(len(data)+1))
		}
		return &chunkReader{data: data, rng: rand.New(rand.NewPCG(seed, 2)), failAt: at}
	}
	return bytes.NewReader(data)
}

// chunkReader returns data in pieces of random sizes, some empty, and
// with failAt > 0, an error after failAt bytes.
type chunkReader struct {
	data   []byte
	off    int
	rng    *rand.Rand
	failAt int
}

var errInjected = errors.New("injected read error")

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.failAt > 0 && c.off >= c.failAt {
		return 0, errInjected
	}
	if c.off == len(c.data) {
		return 0, io.EOF
	}
	var k int
	switch c.rng.IntN(8) {
	case 0:
		k = 0
	case 1, 2:
		k = 1 + c.rng.IntN(3)
	case 3:
		k = 60 + c.rng.IntN(10) // around a vector step
	default:
		k = 1 + c.rng.IntN(200<<10)
	}
	k = min(k, len(p), len(c.data)-c.off)
	if c.failAt > 0 {
		k = min(k, c.failAt-c.off)
	}
	n := copy(p, c.data[c.off:c.off+k])
	c.off += n
	return n, nil
}

// compare runs Resolve both ways (with and without the vector scan) and
// the reference on the same text and wanted ids, and reports where they
// part. The one difference allowed is the package doc's: the reference's
// error for a line too long that Resolve passes over.
func compare(t *testing.T, data []byte, want []ID, kind string, seed uint64) {
	t.Helper()
	ref, refErr := refResolve(newReader(kind, data, seed), want)
	for _, vector := range []bool{false, true} {
		if vector && !hasAVX2() {
			continue
		}
		got, err := resolve(newReader(kind, data, seed), want, vector)
		if err == nil && refErr != nil && passedOver(data, refErr, want) {
			continue
		}
		if fmt.Sprint(err) != fmt.Sprint(refErr) {
			t.Fatalf("vector %v, reader %s: error %v, want %v\nwant ids %q\ntext %q", vector, kind, err, refErr, want, clip(data))
		}
		if !reflect.DeepEqual(got, ref) {
			t.Fatalf("vector %v, reader %s: names %v, want %v\nwant ids %q\ntext %q", vector, kind, got, ref, want, clip(data))
		}
	}
}

// passedOver reports whether err is the reference's for a line too long
// that Resolve passes over: a line starting with a tab outside a wanted
// vendor's block, or with two tabs inside one.
func passedOver(data []byte, err error, want []ID) bool {
	var lineNo int
	if _, e := fmt.Sscanf(err.Error(), "pci.ids:%d: bufio.Scanner: token too long", &lineNo); e != nil {
		return false
	}
	wanted := map[string]bool{}
	for _, id := range want {
		if v := strings.ToLower(id.Vendor); len(v) == 4 && len(strings.ToLower(id.Device)) == 4 {
			wanted[v] = true
		}
	}
	inBlock := false
	for i, line := range bytes.SplitAfter(data, []byte("\n")) {
		if i+1 == lineNo {
			return len(line) > 0 && line[0] == '\t' && (!inBlock || len(line) > 1 && line[1] == '\t')
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) > 0 && line[0] != '\t' && line[0] != '#' {
			inBlock = len(line) >= 4 && wanted[strings.ToLower(string(line[:4]))]
		}
	}
	return false
}

func clip(b []byte) []byte {
	if len(b) > 2000 {
		return b[:2000]
	}
	return b
}

// randomWant draws up to n ids from ids, in the case written or changed,
// with ids not in the database among them.
func randomWant(rng *rand.Rand, ids dbIDs, n int) []ID {
	var want []ID
	for range 1 + rng.IntN(n) {
		var id ID
		switch r := rng.IntN(10); {
		case r < 6 && len(ids.devices) > 0:
			id = ids.devices[rng.IntN(len(ids.devices))]
		case r < 8 && len(ids.vendors) > 0:
			id = ID{ids.vendors[rng.IntN(len(ids.vendors))], fmt.Sprintf("%04x", rng.IntN(1<<16))}
		default:
			id = ID{fmt.Sprintf("%04x", rng.IntN(1<<16)), fmt.Sprintf("%04x", rng.IntN(1<<16))}
		}
		if rng.IntN(4) == 0 {
			id.Vendor = strings.ToUpper(id.Vendor)
		}
		if rng.IntN(4) == 0 {
			id.Device = strings.ToUpper(id.Device)
		}
		want = append(want, id)
	}
	return want
}

// transform rewrites a database the ways its readers must cope with:
// CRLF line ends (bit 0), ids in upper case (bit 1), cut short at a
// random place (bit 2), a random line damaged (bit 3).
func transform(data []byte, how uint8, rng *rand.Rand) []byte {
	if how&1 != 0 {
		data = bytes.ReplaceAll(data, []byte("\n"), []byte("\r\n"))
	}
	if how&2 != 0 {
		data = bytes.Clone(data)
		start := true
		for i, c := range data {
			if start && 'a' <= c && c <= 'f' || i > 0 && data[i-1] == '\t' && 'a' <= c && c <= 'f' {
				data[i] = c - 'a' + 'A'
			}
			start = c == '\n' || start && (c == '\t' || 'A' <= data[i] && data[i] <= 'F' || '0' <= c && c <= '9')
		}
	}
	if how&4 != 0 && len(data) > 0 {
		data = data[:rng.IntN(len(data))]
	}
	if how&8 != 0 && len(data) > 0 {
		data = bytes.Clone(data)
		i := rng.IntN(len(data))
		switch rng.IntN(4) {
		case 0:
			data[i] = 'z'
		case 1:
			data[i] = '\n'
		case 2:
			data[i] = '\t'
		default:
			data = append(data[:i], data[min(len(data), i+1+rng.IntN(100)):]...)
		}
	}
	return data
}

// TestResolveMatchesReference holds Resolve to the line-by-line reading
// on the real database, with random wanted ids, rewrites and readers.
func TestResolveMatchesReference(t *testing.T) {
	data := readDB(t)
	ids := loadDBIDs()
	rng := rand.New(rand.NewPCG(17, 17))
	rounds := 300
	if testing.Short() {
		rounds = 30
	}
	for i := range rounds {
		how := uint8(0)
		if i%3 != 0 {
			how = uint8(rng.IntN(16))
		}
		text := transform(data, how, rng)
		kind := readerKinds[rng.IntN(len(readerKinds))]
		compare(t, text, randomWant(rng, ids, 12), kind, rng.Uint64())
	}
}

// TestResolveServers compares the ids of a few kinds of hosts, in both
// cases and with every reader.
func TestResolveServers(t *testing.T) {
	data := readDB(t)
	for _, want := range [][]ID{systemIDs, gpuServerIDs, vmIDs, {{"ffff", "ffff"}}, {{"0001", "0000"}}, {{"8086", "0000"}, {"10DE", "2330"}}} {
		for _, kind := range readerKinds {
			compare(t, data, want, kind, 5)
		}
	}
}
