package discover

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"berth.dev/berth/bench/benchhost"
	"berth.dev/berth/internal/host/hostfs"
)

// TestFileVersionChunks finds QEMU's version line wherever it sits in a
// .rodata read a chunk at a time: at either end, on both sides of a chunk
// boundary and across one, and takes the real line when a format string
// with the same marker comes first.
func TestFileVersionChunks(t *testing.T) {
	const line = "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)"
	const format = "QEMU emulator version %s\x00"
	qemu := binarySpecs("")[slices.IndexFunc(binarySpecs(""), func(s binarySpec) bool { return s.name == "qemu" })]
	overlap := len(qemu.marker) + maxMarkerLine
	size := 3*rodataChunk + 1000
	tests := []struct {
		name   string
		at     int // offset of the line in .rodata
		format int // offset of a format string with the marker, -1 for none
	}{
		{"start", 0, -1},
		{"end", size - len(line) - 1, -1},
		{"last in the first chunk", rodataChunk - overlap - 1, -1},
		{"first in the overlap", rodataChunk - overlap, -1},
		{"across the boundary", rodataChunk - 20, -1},
		{"just after the boundary", rodataChunk + 1, -1},
		{"third chunk", 2*rodataChunk + 5, -1},
		{"after a format string in the previous chunk", rodataChunk + 100, 1000},
		{"after a format string in the overlap", rodataChunk - 10, rodataChunk - overlap + 3},
	}
	dir := t.TempDir()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := make([]byte, size)
			for j := range data {
				data[j] = "abcdefghij %d\x00"[j%14]
			}
			if tt.format >= 0 {
				copy(data[tt.format:], "\x00"+format)
			}
			copy(data[tt.at:], line+"\x00")
			name := fmt.Sprintf("qemu-%d", i)
			if err := benchhost.WriteELF(filepath.Join(dir, name), 8<<20, data); err != nil {
				t.Fatal(err)
			}
			root, err := hostfs.NewLive(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := newStaticLookup(&session{root: root}, nil).fromFile(qemu, name)
			want := staticVersion{Version: "7.2.22", Vendor: "Debian 1:7.2+dfsg-7+deb12u18+b3", From: fromFile}
			if err != nil || got != want {
				t.Errorf("got %+v, %v; want %+v", got, err, want)
			}
		})
	}
}
