package pciids

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// FuzzResolveMatchesReference holds Resolve, with and without the vector
// scan, to the line-by-line reading on any text: ids are the wanted ids
// ("vvvv:dddd", comma-separated, any case and length) and seed draws more
// from the text's own lines, so that blocks are entered; kind picks the
// reader (readerKinds), which may cut the text in pieces or fail.
func FuzzResolveMatchesReference(f *testing.F) {
	f.Add([]byte(excerpt), "10de:2330,8086:1572", uint8(0), uint64(0))
	f.Add([]byte(strings.ReplaceAll(excerpt, "\n", "\r\n")), "10DE:2331", uint8(4), uint64(1))
	f.Add([]byte("10de  N\n\t2330  D\n\t\t10de 0001  S\n8086  I\n\tabcd  X\nC 03  Display\n"), "10de:2330,8086:ABCD", uint8(1), uint64(2))
	f.Fuzz(func(t *testing.T, data []byte, ids string, kind uint8, seed uint64) {
		var want []ID
		for id := range strings.SplitSeq(ids, ",") {
			v, d, _ := strings.Cut(id, ":")
			want = append(want, ID{v, d})
		}
		rng := rand.New(rand.NewPCG(seed, 3))
		if found := idsIn(data); len(found.vendors) > 0 {
			want = append(want, randomWant(rng, found, 4)...)
		}
		compare(t, data, want, readerKinds[int(kind)%len(readerKinds)], seed)
	})
}

// FuzzResolvePCIIDs holds Resolve to the line-by-line reading on the
// distribution's database, with up to n random wanted ids drawn from it
// (and some not in it), the database rewritten as transform's how says,
// and the reader kind picks.
func FuzzResolvePCIIDs(f *testing.F) {
	f.Add(uint64(0), uint8(6), uint8(0), uint8(0))
	f.Add(uint64(1), uint8(15), uint8(3), uint8(4))
	f.Fuzz(func(t *testing.T, seed uint64, n, how, kind uint8) {
		data := readDB(t)
		rng := rand.New(rand.NewPCG(seed, 4))
		text := transform(data, how, rng)
		want := randomWant(rng, loadDBIDs(), 1+int(n%24))
		compare(t, text, want, readerKinds[int(kind)%len(readerKinds)], seed)
	})
}
