//go:build amd64

package pciids

// vectorMin is the text scanAVX2 needs to take a step: 64 positions and
// the two bytes after the last.
const vectorMin = 66

// hasAVX2 reports whether the CPU has AVX2 and POPCNT and the operating
// system saves the AVX registers. It asks CPUID on every call (three
// leaves, once per Resolve) rather than at program start, as
// golang.org/x/sys/cpu would: each is a VM exit in a guest, and most berth
// commands never read pci.ids.
func hasAVX2() bool

// scanAVX2 is scanner.scanLines 64 bytes a step, from the start of b
// and with the same rules, among the positions it can judge whole steps
// at a time. For each line left to Resolve it records in out the index
// of the newline before it and the newlines in b before that. It returns
// after a step that recorded a line which may end the block or start one
// (with dev, one not starting with a tab; without, any), once out has
// fewer than 64 entries free, or when fewer than vectorMin bytes are left
// after its last step: n is the number of positions judged, lines the
// number of newlines among them, count the entries recorded and passed
// the index of the newline before the last line passed, or -1.
//
//go:noescape
func scanAVX2(b []byte, dev bool, filter *idSet, out *[batchCap]entry) (n, lines, count, passed int)
