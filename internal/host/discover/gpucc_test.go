package discover

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"berth.dev/berth/internal/testkit"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// syntheticBAR0 writes a file standing for a device's sysfs resource0: the
// size of an H100's 16 MiB BAR0, the given registers little-endian at
// their offsets, zero elsewhere.
func syntheticBAR0(t *testing.T, path string, regs map[uint32]uint32) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(16 << 20); err != nil {
		t.Fatal(err)
	}
	for off, v := range regs {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], v)
		if _, err := f.WriteAt(b[:], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestProbeBAR0 maps a synthetic resource0 the way the live probe maps a
// device's: the registers read are the values written.
func TestProbeBAR0(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "resource0")
	syntheticBAR0(t, res, map[uint32]uint32{bar0GPUBoot: 0xff, bar0Hopper: 0x21, bar0SwitchPPCIe: 0x1})
	open := func() (*os.File, error) { return os.Open(res) }

	d := probeBAR0(open, res, ccHopper.offsets())
	if d.Error != "" {
		t.Fatal(d.Error)
	}
	want := map[string]string{"0x200bc": "0x000000ff", "0x1182cc": "0x00000021"}
	if len(d.Registers) != len(want) {
		t.Fatalf("registers %v, want %v", d.Registers, want)
	}
	for k, v := range want {
		if d.Registers[k] != v {
			t.Errorf("register %s = %q, want %q", k, d.Registers[k], v)
		}
	}
	cc, ppcie, err := decodeBAR0(ccHopper, d)
	if err != nil || cc != "on" || ppcie != "on" {
		t.Errorf("decoded %q %q %v, want on on", cc, ppcie, err)
	}

	// A register past the end of the BAR is refused, not read.
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, make([]byte, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	d = probeBAR0(func() (*os.File, error) { return os.Open(short) }, short, ccHopper.offsets())
	if d.Registers != nil || !strings.Contains(d.Error, "outside it") {
		t.Errorf("short BAR: %+v, want an error naming the register outside it", d)
	}
	// A missing file reports the errno.
	d = probeBAR0(func() (*os.File, error) { return os.Open(filepath.Join(dir, "none")) }, "none", ccHopper.offsets())
	if d.Errno != "ENOENT" || d.Error == "" {
		t.Errorf("missing file: %+v, want ENOENT", d)
	}
}

func TestDecodeBAR0(t *testing.T) {
	regs := func(kv ...string) bar0Device {
		d := bar0Device{Registers: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			d.Registers[kv[i]] = kv[i+1]
		}
		return d
	}
	tests := []struct {
		name      string
		kind      ccKind
		d         bar0Device
		cc, ppcie string
		err       string
	}{
		{"hopper off", ccHopper, regs("0x200bc", "0x000000ff", "0x1182cc", "0x00000000"), "off", "off", ""},
		{"hopper on", ccHopper, regs("0x200bc", "0x000000ff", "0x1182cc", "0x00000001"), "on", "off", ""},
		{"hopper on, other bits set", ccHopper, regs("0x200bc", "0x000000ff", "0x1182cc", "0x00000005"), "on", "off", ""},
		{"hopper devtools", ccHopper, regs("0x200bc", "0x000000ff", "0x1182cc", "0x00000003"), "devtools", "off", ""},
		{"hopper ppcie", ccHopper, regs("0x200bc", "0x000000ff", "0x1182cc", "0x00000020"), "off", "on", ""},
		{"hopper invalid", ccHopper, regs("0x200bc", "0x000000ff", "0x1182cc", "0x00000002"), "", "", "devtools without CC"},
		{"not booted", ccHopper, regs("0x200bc", "0x00000000", "0x1182cc", "0x00000001"), "", "", "not finished booting"},
		{"powered down", ccHopper, regs("0x200bc", "0xffffffff", "0x1182cc", "0xffffffff"), "", "", "does not answer"},
		{"firewall up", ccBlackwell, regs("0x200bc", "0x000000ff", "0x590", "0xbadf5040"), "", "", "refuses the access"},
		{"register missing", ccHopper, regs("0x200bc", "0x000000ff"), "", "", "0x1182cc was not read"},
		{"not hex", ccHopper, regs("0x200bc", "0x000000ff", "0x1182cc", "on"), "", "", "not a 32-bit hex value"},
		{"too wide", ccHopper, regs("0x200bc", "0x000000ff", "0x1182cc", "0x100000000"), "", "", "not a 32-bit hex value"},
		{"blackwell on", ccBlackwell, regs("0x200bc", "0x000000ff", "0x590", "0x00000001"), "on", "", ""},
		{"switch ppcie on", ccSwitchLS10, regs("0x660bc", "0x000000ff", "0x28c50", "0x00000001"), "", "on", ""},
		{"switch ppcie off", ccSwitchLS10, regs("0x660bc", "0x000000ff", "0x28c50", "0x00000000"), "", "off", ""},
		{"probe error", ccHopper, bar0Device{Error: "open resource0: permission denied", Errno: "EACCES"}, "", "", "permission denied"},
		{"no layout", ccUnknownGen, regs(), "", "", "no CC register layout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc, ppcie, err := decodeBAR0(tt.kind, tt.d)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || cc != "" || ppcie != "" {
					t.Fatalf("got %q %q %v, want an error containing %q", cc, ppcie, err, tt.err)
				}
				return
			}
			if err != nil || cc != tt.cc || ppcie != tt.ppcie {
				t.Fatalf("got %q %q %v, want %q %q", cc, ppcie, err, tt.cc, tt.ppcie)
			}
		})
	}
}

func TestParseVBIOS(t *testing.T) {
	// The layout of nv-procfs.c's information file.
	info := "Model: \t\t NVIDIA H100 PCIe\nIRQ:   \t\t 156\nGPU UUID: \t GPU-5f6e1c3a-0b3c-1e45-0c2d-7f0a4b9c2e11\nVideo BIOS: \t 96.00.5E.00.01\nBus Type: \t PCIe\n"
	for _, tc := range []struct{ in, want, err string }{
		{info, "96.00.5e.00.01", ""},
		{"Video BIOS: \t ??.??.??.??.??\n", "", "five two-digit hex fields"},
		{"Video BIOS: \t 96.00.5e\n", "", "five two-digit hex fields"},
		{"Model: x\n", "", "no Video BIOS line"},
	} {
		got, err := parseVBIOS(tc.in)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) || got != tc.want {
			t.Errorf("parseVBIOS(%q) = %q, %v; want %q, error %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseVBIOS(f *testing.F) {
	f.Add("Video BIOS: \t 96.00.5e.00.01\n")
	f.Add("Video BIOS: \t ??.??.??.??.??\n")
	f.Fuzz(func(t *testing.T, in string) {
		v, err := parseVBIOS(in)
		if err == nil && !vbiosShape(v) {
			t.Fatalf("accepted %q", v)
		}
	})
}

// ccHost builds a host root with one H100 PCIe on vfio-pci and one LS10
// NVSwitch, each with a synthetic resource0, and returns its directory.
func ccHost(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for addr, ids := range map[string][3]string{
		"0000:41:00.0": {"0x10de", "0x2331", "0x030200"},
		"0000:05:00.0": {"0x10de", "0x22a3", "0x068000"},
	} {
		d := filepath.Join(dir, "sys/bus/pci/devices", addr)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"vendor": ids[0], "device": ids[1], "class": ids[2]} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	syntheticBAR0(t, filepath.Join(dir, "sys/bus/pci/devices/0000:41:00.0/resource0"), map[uint32]uint32{bar0GPUBoot: 0xff, bar0Hopper: 0x1})
	syntheticBAR0(t, filepath.Join(dir, "sys/bus/pci/devices/0000:05:00.0/resource0"), map[uint32]uint32{bar0SwitchBoot: 0xff, bar0SwitchPPCIe: 0x0})
	return dir
}

// TestGPUCCRoots: the modes come from the live registers only with
// --probe and as root, and a snapshot carries them to an offline root,
// which never opens resource0.
func TestGPUCCRoots(t *testing.T) {
	testkit.NeedsRoot(t, "reading BAR0 the way a live root does, which berth does only as root")
	dir := ccHost(t)
	live, err := hostfs.NewLive(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	f := Run(ctx, live, Options{})
	if r, _ := f.UnknownReason("gpus[0000:41:00.0].ccMode"); !strings.HasPrefix(r, facts.ReasonNotRun) {
		t.Errorf("live root without --probe: reason %q, want %q", r, facts.ReasonNotRun)
	}

	rec := hostfs.NewRecorder(live)
	f = Run(ctx, rec, Options{Probe: true})
	if len(f.GPUs) != 1 || f.GPUs[0].CCMode != "on" || f.GPUs[0].PPCIeMode != "off" {
		t.Fatalf("live GPUs = %+v, want CC on, PPCIe off", f.GPUs)
	}
	if len(f.NVSwitches) != 1 || f.NVSwitches[0].PPCIeMode != "off" || f.NVSwitches[0].Generation != "ls10" {
		t.Fatalf("live NVSwitches = %+v, want one ls10 with PPCIe off", f.NVSwitches)
	}
	if r, ok := f.UnknownReason("gpus.vbios"); ok || f.GPUs[0].VBIOS != "" {
		t.Errorf("vbios of a GPU on no driver: %q %q, want neither value nor unknown (it is not exposed)", f.GPUs[0].VBIOS, r)
	}
	recorded := rec.Capture().Recorded
	raw, ok := recorded.Probes[bar0ProbeName]
	if !ok {
		t.Fatalf("the snapshot recorded no %s probe: %v", bar0ProbeName, recorded.Probes)
	}
	var p bar0Probe
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if got := p.Devices["0000:41:00.0"].Registers["0x1182cc"]; got != "0x00000001" {
		t.Errorf("recorded CC register %q, want 0x00000001", got)
	}

	// Offline: the recorded probe, and resource0 replaced by something
	// that would fail loudly if it were mapped (a directory).
	for _, addr := range []string{"0000:41:00.0", "0000:05:00.0"} {
		res := filepath.Join(dir, "sys/bus/pci/devices", addr, "resource0")
		if err := os.Remove(res); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(res, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, ".berth"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(recorded)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, hostfs.RecordedFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	off, err := hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	f = Run(ctx, off, Options{Probe: true})
	if len(f.GPUs) != 1 || f.GPUs[0].CCMode != "on" || len(f.NVSwitches) != 1 || f.NVSwitches[0].PPCIeMode != "off" {
		t.Fatalf("offline GPUs %+v, switches %+v: want the recorded modes", f.GPUs, f.NVSwitches)
	}

	// Offline without a recording: unknown, naming how to get one.
	if err := os.Remove(filepath.Join(dir, hostfs.RecordedFile)); err != nil {
		t.Fatal(err)
	}
	off, err = hostfs.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	f = Run(ctx, off, Options{})
	for _, field := range []string{"gpus[0000:41:00.0].ccMode", "nvswitches[0000:05:00.0].ppcieMode"} {
		if r, _ := f.UnknownReason(field); !strings.HasPrefix(r, facts.ReasonOffline) {
			t.Errorf("%s offline: reason %q, want %q", field, r, facts.ReasonOffline)
		}
	}
}
