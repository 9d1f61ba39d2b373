//go:build !amd64

package pciids

// vectorMin keeps scanner.scan from calling scanAVX2, which only amd64
// has; the line-at-a-time scan does all the work.
const vectorMin = int(^uint(0) >> 1)

func hasAVX2() bool { return false }

func scanAVX2(b []byte, dev bool, filter *idSet, out *[batchCap]entry) (n, lines, count, passed int) {
	return 0, 0, 0, -1
}
