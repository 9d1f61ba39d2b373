package discover

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/testkit"
)

// TestKernelLogFollower follows this machine's real /dev/kmsg across
// discoveries, as the agent does: the first discovery reads the whole
// ring buffer and keeps what a full read keeps; a discovery after the
// kernel logged nothing new reads no bytes and keeps the same lines;
// after a message with a boot-log keyword is written to /dev/kmsg (as
// root may), the next discovery reads just that record and the line is
// kept; a follower asked about another root refuses, and discovery falls
// back to the saved logs with the reason.
func TestKernelLogFollower(t *testing.T) {
	testkit.NeedsRoot(t, "reading and writing /dev/kmsg")
	root, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	k := NewKernelLogFollower(root)
	defer k.Close()
	ctx := context.Background()
	first := Run(ctx, root, Options{KernelLog: k})
	if first.Kernel.BootLogSource != "dev/kmsg" {
		t.Fatalf("boot log source %q, want dev/kmsg (unknown: %v)", first.Kernel.BootLogSource, first.Unknown)
	}
	whole := k.bytesRead
	if whole < 1000 {
		t.Fatalf("first discovery read %d bytes of the kernel log, want the whole ring buffer", whole)
	}
	// A full read of the same log keeps the same lines, unless the kernel
	// logged a kept line in between: then the full read has more.
	full := Run(ctx, root, Options{})
	if !slices.Equal(full.Kernel.BootLog[:min(len(full.Kernel.BootLog), len(first.Kernel.BootLog))], first.Kernel.BootLog) {
		t.Errorf("follower kept\n%q\nfull read keeps\n%q", first.Kernel.BootLog, full.Kernel.BootLog)
	}

	marker := make([]byte, 6)
	rand.Read(marker)
	msg := "berth-test kvm: follower marker " + hex.EncodeToString(marker)
	if err := os.WriteFile("/dev/kmsg", []byte(msg+"\n"), 0); err != nil {
		t.Fatalf("writing to /dev/kmsg: %v", err)
	}
	before := k.bytesRead
	second := Run(ctx, root, Options{KernelLog: k})
	read := k.bytesRead - before
	if read == 0 || read > 4096 {
		t.Errorf("second discovery read %d bytes, want only the records since the first (the marker's %d)", read, len(msg)+1)
	}
	if len(first.Kernel.BootLog) < maxBootLines && !slices.ContainsFunc(second.Kernel.BootLog, func(l string) bool { return strings.Contains(l, msg) }) {
		t.Errorf("marker %q not kept after the follower read it: %q", msg, second.Kernel.BootLog)
	}
	if !slices.Equal(second.Kernel.BootLog[:len(first.Kernel.BootLog)], first.Kernel.BootLog) {
		t.Errorf("lines kept before changed")
	}

	other, err := hostfs.NewLive("/")
	if err != nil {
		t.Fatal(err)
	}
	f := Run(ctx, other, Options{KernelLog: k})
	if f.Kernel.BootLogSource == "dev/kmsg" {
		t.Errorf("a follower of another root was used")
	}
}
