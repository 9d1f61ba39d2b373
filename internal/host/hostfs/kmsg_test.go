package hostfs

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"berth.dev/berth/internal/testkit"
)

func TestKeepKmsgMessage(t *testing.T) {
	for _, tc := range []struct {
		name, kept, rec, want string
	}{
		{"first record", "", "6,1,0,-;Linux version 6.8.0\n", "Linux version 6.8.0\n"},
		{"after kept text", "a\n", "4,2,10,-;kvm: disabled by bios\n", "a\nkvm: disabled by bios\n"},
		{"dictionary lines dropped", "", "6,3,20,-;pci 0000:00:01.0: bridge\n SUBSYSTEM=pci\n DEVICE=+pci:0000:00:01.0\n", "pci 0000:00:01.0: bridge\n"},
		{"continuation flag", "", "6,4,30,c;more\n", "more\n"},
		{"no header", "", "plain line\n", "plain line\n"},
		{"no newline", "", "6,5,40,-;SEV-SNP: not enabled", "SEV-SNP: not enabled\n"},
		{"empty message", "x\n", "6,6,50,-;\n", "x\n\n"},
		{"semicolon in message", "", "6,7,60,-;a;b\n", "a;b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The record sits after the kept text, within the capacity,
			// with a byte to spare, as readKernelLog leaves it.
			buf := make([]byte, len(tc.kept), len(tc.kept)+len(tc.rec)+1)
			copy(buf, tc.kept)
			copy(buf[len(buf):cap(buf)], tc.rec)
			got := keepKmsgMessage(buf, len(tc.rec))
			if string(got) != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestReadKernelLog reads this machine's /dev/kmsg as KernelLog does,
// with a first capacity small enough that the text grows several times,
// and compares it with the records read one by one into buffers of
// their own. Messages logged between the two reads (or dropped from a
// full ring meanwhile) are allowed for: the two texts must line up over
// most of the shorter one.
func TestReadKernelLog(t *testing.T) {
	testkit.NeedsRoot(t, "reading /dev/kmsg")
	for _, first := range []int{0, 1 << 10, kmsgFirstSize} {
		fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readKernelLog(fd, first)
		syscall.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		want := referenceKmsg(t)
		gl := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
		wl := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
		if len(gl) < 10 {
			t.Fatalf("first %d: only %d lines read", first, len(gl))
		}
		if !linedUp(gl, wl) {
			t.Errorf("first %d: %d lines read do not line up with the %d read record by record", first, len(gl), len(wl))
		}
	}
}

// referenceKmsg reads /dev/kmsg one record per read into a fresh buffer
// each, keeping the text between the header's ';' and the first newline.
func referenceKmsg(t *testing.T) []byte {
	t.Helper()
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	var out []byte
	for {
		rec := make([]byte, kmsgRecordMax)
		n, err := syscall.Read(fd, rec)
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EINTR) {
			continue
		}
		if errors.Is(err, syscall.EAGAIN) || n == 0 {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		_, msg, _ := bytes.Cut(rec[:n], []byte(";"))
		msg, _, _ = bytes.Cut(msg, []byte("\n"))
		out = append(append(out, msg...), '\n')
	}
}

// linedUp reports whether a and b, two readings of a ring buffer, agree
// where they overlap, and overlap over at least half the shorter one.
func linedUp(a, b []string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	for off := range b {
		n := min(len(a), len(b)-off)
		if n >= len(a)/2 && slices.Equal(a[:n], b[off:off+n]) {
			return true
		}
	}
	for off := range a {
		n := min(len(a)-off, len(b))
		if len(a)-off >= len(a)/2 && slices.Equal(a[off:off+n], b[:n]) {
			return true
		}
	}
	return false
}
