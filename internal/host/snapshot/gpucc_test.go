package snapshot

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/testkit"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// TestGPUCCModeRoundTrip snapshots a live root holding one H100 whose
// resource0 is a synthetic file (the CC register at 0x1182cc says on, the
// boot register 0x200bc says booted): the snapshot carries the raw
// registers, and the snapshot opened offline gives the same CC mode
// without any resource0 in it.
func TestGPUCCModeRoundTrip(t *testing.T) {
	testkit.NeedsRoot(t, "the live BAR0 read, which runs only as root")
	dir := t.TempDir()
	dev := filepath.Join(dir, "sys/bus/pci/devices/0000:41:00.0")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"vendor": "0x10de\n", "device": "0x2331\n", "class": "0x030200\n"} {
		if err := os.WriteFile(filepath.Join(dev, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bar := make([]byte, 0x120000)
	binary.LittleEndian.PutUint32(bar[0x200bc:], 0xff)
	binary.LittleEndian.PutUint32(bar[0x1182cc:], 0x1)
	if err := os.WriteFile(filepath.Join(dev, "resource0"), bar, 0o600); err != nil {
		t.Fatal(err)
	}
	live, err := hostfs.NewLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	before, m, err := Take(context.Background(), live, &buf, Options{Now: fixedNow, Discover: discover.Options{Now: fixedNow, Probe: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(before.GPUs) != 1 || before.GPUs[0].CCMode != "on" {
		t.Fatalf("live GPUs %+v, want CC on", before.GPUs)
	}
	recorded := false
	for _, p := range m.Probes {
		recorded = recorded || p == "nvidia-bar0"
	}
	for _, f := range m.Files {
		if filepath.Base(f.Path) == "resource0" {
			t.Errorf("the snapshot holds %s: device memory must never be copied", f.Path)
		}
	}
	if !recorded {
		t.Fatalf("manifest probes %v: no nvidia-bar0", m.Probes)
	}
	after := rediscover(t, buf.Bytes())
	if len(after.GPUs) != 1 || after.GPUs[0].CCMode != "on" || after.GPUs[0].PPCIeMode != "off" {
		t.Fatalf("offline GPUs %+v, want the recorded CC on, PPCIe off", after.GPUs)
	}
}

// rediscover writes a snapshot to a file, opens it as an offline root and
// discovers it.
func rediscover(t *testing.T, snapshot []byte) *facts.Facts {
	t.Helper()
	file := filepath.Join(t.TempDir(), "snap.tar.gz")
	if err := os.WriteFile(file, snapshot, 0o644); err != nil {
		t.Fatal(err)
	}
	snap, cleanup, err := hostfs.Open(file, false)
	defer cleanup()
	if err != nil {
		t.Fatal(err)
	}
	return discover.Run(context.Background(), snap, discover.Options{Now: fixedNow})
}
