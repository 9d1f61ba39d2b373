package discover

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/platform"
)

// The confidential-computing state of NVIDIA GPUs and NVSwitches is held
// in BAR0 registers, which NVIDIA's own host tool reads through the
// device's sysfs resource0 (NVIDIA/gpu-admin-tools, nvidia_gpu_tools.py,
// release v2025.10.20: Gpu.query_cc_mode_hopper, query_cc_mode_blackwell,
// Gpu.query_ppcie_mode, NvSwitch.query_ppcie_mode, wait_for_boot). The
// offsets and encodings below are from there; the Hopper register is
// NV_PGC6_AON_SECURE_SCRATCH_GROUP_20 (NVIDIA/open-gpu-kernel-modules,
// src/common/inc/swref/published/hopper/gh100/dev_gc6_island_addendum.h:
// bit 0 CC_MODE_ENABLED, bit 1 CC_DEV_ENABLED).
const (
	// bar0Hopper is NV_PGC6_AON_SECURE_SCRATCH_GROUP_20 on Hopper: bits
	// 1:0 are the CC mode (0 off, 1 on, 3 devtools; 2 is invalid, "fix
	// by setting the CC mode" in the tool's words), bit 5 (0x20) PPCIe.
	bar0Hopper = 0x1182cc
	// bar0Blackwell holds the CC mode in bits 1:0 on Blackwell, encoded
	// as on Hopper; the tool queries PPCIe on Hopper GPUs only.
	bar0Blackwell = 0x590
	// bar0GPUBoot is NV_THERM_I2CS_SCRATCH_FSP_BOOT_COMPLETE on Hopper and
	// GB100 (gpu/regs/gh100/therm.py, gpu/regs/gb100/therm.py): 0xff once
	// the GPU's firmware has booted. Before that the CC register is not
	// settled, so the tool waits for it; berth does not wait, it says so.
	bar0GPUBoot = 0x200bc
	// bar0SwitchPPCIe is the PPCIe register of an NVSwitch 3 (LS10,
	// "laguna"): bit 0 is PPCIe on.
	bar0SwitchPPCIe = 0x28c50
	// bar0SwitchBoot is the NVSwitch 3's boot-complete register, 0xff
	// once booted.
	bar0SwitchBoot = 0x660bc
	// bootComplete is the boot-complete value of both.
	bootComplete = 0xff
	// allOnes is what a read returns from a device that does not answer
	// (powered down to D3cold by vfio-pci's idle handling, or gone).
	allOnes = 0xffffffff
	// badf is the upper half of what an NVIDIA GPU returns for a register
	// it refuses to show (0xbadf....). gpu-admin-tools counts it, like
	// all ones, as a failed MMIO sanity check of PMC_BOOT_0, and polls
	// past it on Blackwell while the BAR0 firewall is up (wait_for_boot).
	badf = 0xbadf
)

// bar0ProbeName is the recorded probe holding the raw BAR0 values.
const bar0ProbeName = "nvidia-bar0"

// bar0Probe is what was read from the BAR0 of each NVIDIA GPU and NVSwitch
// whose CC or PPCIe mode berth reads, as recorded in a snapshot's
// .berth/recorded.json: raw register values, so that an offline root is
// decoded by the same code as a live one.
type bar0Probe struct {
	// Devices is keyed by PCI address ("0000:41:00.0").
	Devices map[string]bar0Device `json:"devices"`
}

// bar0Device is one device's reads.
type bar0Device struct {
	// Registers maps a BAR0 offset ("0x1182cc") to the 32-bit value read
	// there ("0x00000001").
	Registers map[string]string `json:"registers,omitempty"`
	// Error is why the registers could not be read; Errno its errno name.
	Error string `json:"error,omitempty"`
	Errno string `json:"errno,omitempty"`
}

// ccKind is which register layout a device has.
type ccKind int

const (
	ccNone ccKind = iota
	ccHopper
	ccBlackwell
	ccSwitchLS10
	// ccUnknownGen is a GPU berth counts as CC-capable whose generation's
	// layout it does not know: its mode stays unknown.
	ccUnknownGen
)

// gpuCCKind returns the layout of an NVIDIA GPU by device id: Hopper is
// 0x22f0-0x237f, Blackwell 0x2900-0x297f (the ranges confidentialCapable
// uses).
func gpuCCKind(g facts.GPU) ccKind {
	if g.Vendor != "nvidia" || !g.ConfidentialCapable {
		return ccNone
	}
	id, err := strconv.ParseUint(g.DeviceID, 16, 16)
	switch {
	case err != nil:
		return ccUnknownGen
	case id >= 0x22f0 && id <= 0x237f:
		return ccHopper
	case id >= 0x2900 && id <= 0x297f:
		return ccBlackwell
	}
	return ccUnknownGen
}

// offsets lists the registers read for a layout, boot register first.
func (k ccKind) offsets() []uint32 {
	switch k {
	case ccHopper:
		return []uint32{bar0GPUBoot, bar0Hopper}
	case ccBlackwell:
		return []uint32{bar0GPUBoot, bar0Blackwell}
	case ccSwitchLS10:
		return []uint32{bar0SwitchBoot, bar0SwitchPPCIe}
	}
	return nil
}

// NVSwitch PCI device ids, from NVIDIA/open-gpu-kernel-modules
// src/common/nvswitch/kernel/nvswitch.c (nvswitch_lr10_device_ids,
// nvswitch_ls10_device_ids). Only the management endpoints are switches
// here; LS10's 0x22a8-0x22af are its bridge functions.
var lr10SwitchIDs = []uint64{0x1ae8, 0x1af0, 0x1af1, 0x1af2, 0x1af3, 0x1af4, 0x1af5, 0x1af6, 0x1af7, 0x1af8, 0x1af9, 0x1afa, 0x1afb, 0x1afc, 0x1afd, 0x1afe, 0x1aff}

// nvswitchGeneration returns "ls10", "lr10" or "" for a PCI device. A
// switch is class 0680 ("Bridge [0680]: NVIDIA Corporation GH100 [H100
// NVSwitch] [10de:22a3]" in lspci -nn on HGX H100 boards).
func nvswitchGeneration(d facts.PCIDevice) string {
	if d.Vendor != "10de" || !strings.HasPrefix(d.Class, "0680") {
		return ""
	}
	id, err := strconv.ParseUint(d.Device, 16, 16)
	if err != nil {
		return ""
	}
	if id >= 0x22a0 && id <= 0x22a7 {
		return "ls10"
	}
	for _, x := range lr10SwitchIDs {
		if id == x {
			return "lr10"
		}
	}
	return ""
}

// nvswitches lists the NVSwitches among devs.
func nvswitches(devs []facts.PCIDevice) []facts.NVSwitch {
	var out []facts.NVSwitch
	for _, d := range devs {
		if gen := nvswitchGeneration(d); gen != "" {
			out = append(out, facts.NVSwitch{Address: d.Address, DeviceID: d.Device, Driver: d.Driver, Generation: gen})
		}
	}
	return out
}

// ccTarget is one device whose BAR0 is read.
type ccTarget struct {
	addr  string
	kind  ccKind
	field string // the Unknown field of its mode
}

// gpuCC fills the CC and PPCIe modes of f's NVIDIA GPUs and NVSwitches
// and the GPUs' VBIOS versions. The registers are read on a live root
// only with Options.Probe (it maps device memory) and only as root (the
// kernel makes resource0 root-only); an offline root has them only from a
// recorded probe, and a fixture's resource0 is never opened.
func (s *session) gpuCC(f *facts.Facts) {
	var targets []ccTarget
	for i := range f.GPUs {
		g := &f.GPUs[i]
		if g.PhysFn != "" {
			continue // a vGPU VF: the mode is its physical GPU's
		}
		k := gpuCCKind(*g)
		if k == ccNone {
			continue
		}
		// The VBIOS is only in the nvidia driver's information file;
		// on other drivers it is not unknown but absent, as Facts says.
		if g.Driver == "nvidia" {
			s.gpuVBIOS(g)
		}
		field := "gpus[" + g.Address + "].ccMode"
		if k == ccUnknownGen {
			s.unknownf(field, "%s: no known CC register layout for NVIDIA device 10de:%s (neither Hopper nor Blackwell)", facts.ReasonUnparseable, g.DeviceID)
			continue
		}
		targets = append(targets, ccTarget{g.Address, k, field})
	}
	for _, sw := range f.NVSwitches {
		if sw.Generation == "ls10" {
			targets = append(targets, ccTarget{sw.Address, ccSwitchLS10, "nvswitches[" + sw.Address + "].ppcieMode"})
		}
	}
	if len(targets) == 0 {
		return
	}
	p, ok := s.bar0(targets)
	if !ok {
		return
	}
	for _, t := range targets {
		d, found := p.Devices[t.addr]
		if !found {
			s.unknownf(t.field, "%s: the recorded BAR0 probe has no entry for %s", facts.ReasonMissing, t.addr)
			continue
		}
		cc, ppcie, err := decodeBAR0(t.kind, d)
		if err != nil {
			reason := facts.ReasonUnparseable
			switch {
			case d.Errno == "EACCES" || d.Errno == "EPERM":
				reason = facts.ReasonPermission
			case d.Error != "":
				reason = facts.ReasonMissing
			}
			s.unknownf(t.field, "%s: %s: %v", reason, t.addr, err)
			continue
		}
		if t.kind == ccSwitchLS10 {
			for i := range f.NVSwitches {
				if f.NVSwitches[i].Address == t.addr {
					f.NVSwitches[i].PPCIeMode = ppcie
				}
			}
			continue
		}
		for i := range f.GPUs {
			if f.GPUs[i].Address == t.addr {
				f.GPUs[i].CCMode, f.GPUs[i].PPCIeMode = cc, ppcie
			}
		}
	}
}

// bar0 returns the BAR0 reads of targets: probed on a live root (and
// recorded for snapshots), recorded on an offline one. When there are
// none it records every target's mode as unknown and returns false.
func (s *session) bar0(targets []ccTarget) (bar0Probe, bool) {
	var p bar0Probe
	unknown := func(reason string) (bar0Probe, bool) {
		for _, t := range targets {
			s.unknownf(t.field, "%s", reason)
		}
		return p, false
	}
	if !s.root.Live() {
		switch err := s.root.Probe(bar0ProbeName, &p); {
		case errors.Is(err, hostfs.ErrOffline):
			return unknown(facts.ReasonOffline + ": no recorded BAR0 probe (a snapshot taken with berth snapshot --probe as root has one)")
		case err != nil:
			return unknown(fmt.Sprintf("%s: %v", facts.ReasonUnparseable, err))
		}
		return p, true
	}
	raw, ok := s.root.(hostfs.RawReader)
	switch {
	case !s.opt.Probe:
		return unknown(facts.ReasonNotRun + ": reading a GPU's BAR0 maps device memory; it runs with --probe")
	case os.Geteuid() != 0:
		return unknown(facts.ReasonPermission + ": the kernel lets only root map a device's BAR0 (resource0)")
	case !ok:
		return unknown(facts.ReasonNotRun + ": this root cannot open device files")
	}
	p.Devices = make(map[string]bar0Device, len(targets))
	for _, t := range targets {
		name := path.Join(pciDevicesDir, t.addr, "resource0")
		p.Devices[t.addr] = probeBAR0(func() (*os.File, error) { return raw.OpenRaw(name) }, name, t.kind.offsets())
	}
	hostfs.RecordProbe(s.root, bar0ProbeName, p)
	return p, true
}

// decodeBAR0 turns one device's register values into its CC and PPCIe
// modes ("on", "off", "devtools"; "" where the layout has none).
func decodeBAR0(k ccKind, d bar0Device) (cc, ppcie string, err error) {
	if d.Error != "" {
		return "", "", errors.New(d.Error)
	}
	offs := k.offsets()
	if len(offs) == 0 {
		return "", "", errors.New("no CC register layout for this device")
	}
	vals := make([]uint32, len(offs))
	for i, off := range offs {
		key := fmt.Sprintf("%#x", off)
		raw, ok := d.Registers[key]
		if !ok {
			return "", "", fmt.Errorf("register %s was not read", key)
		}
		v, perr := strconv.ParseUint(strings.TrimPrefix(raw, "0x"), 16, 32)
		if perr != nil || !strings.HasPrefix(raw, "0x") {
			return "", "", fmt.Errorf("register %s: %q is not a 32-bit hex value", key, raw)
		}
		if v == allOnes {
			return "", "", fmt.Errorf("register %s reads 0xffffffff: the device does not answer (powered down by vfio-pci while idle, or in reset)", key)
		}
		if v>>16 == badf {
			return "", "", fmt.Errorf("register %s reads %#x: the GPU refuses the access (0xbadf...: as while a Blackwell GPU's BAR0 firewall is up, before its firmware lifts it)", key, v)
		}
		vals[i] = uint32(v)
	}
	if vals[0] != bootComplete {
		return "", "", fmt.Errorf("the firmware has not finished booting (boot register %#x = %#x, want %#x)", offs[0], vals[0], bootComplete)
	}
	reg := vals[1]
	if k == ccSwitchLS10 {
		return "", onOff(reg&0x1 != 0), nil
	}
	switch reg & 0x3 {
	case 0x0:
		cc = "off"
	case 0x1:
		cc = "on"
	case 0x3:
		cc = "devtools"
	default:
		return "", "", fmt.Errorf("CC register %#x = %#x: devtools without CC (invalid; NVIDIA's tool fixes it by setting the CC mode)", offs[1], reg)
	}
	if k == ccHopper {
		ppcie = onOff(reg&0x20 != 0)
	}
	return cc, ppcie, nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// nvidiaProcGPUs is where the nvidia driver describes each GPU it drives.
const nvidiaProcGPUs = "proc/driver/nvidia/gpus"

// gpuVBIOS reads the VBIOS version of g, a GPU on the nvidia driver, from
// the driver's information file. The kernel shows it nowhere else: a GPU on vfio-pci
// has it only in its option ROM, which sysfs exposes only after a write.
func (s *session) gpuVBIOS(g *facts.GPU) {
	field := "gpus[" + g.Address + "].vbios"
	p := path.Join(nvidiaProcGPUs, g.Address, "information")
	b, ok := s.readFile(field, p)
	if !ok {
		return
	}
	v, err := parseVBIOS(string(b))
	if err != nil {
		s.unknownf(field, "%s", unparseable(p, 0, err.Error()))
		return
	}
	g.VBIOS = v
}

// parseVBIOS returns the "Video BIOS:" value of the nvidia driver's
// /proc/driver/nvidia/gpus/<address>/information, which the driver prints
// as five two-digit hex fields (nv-procfs.c: "Video BIOS: \t
// %02x.%02x.%02x.%02x.%02x", "??.??.??.??.??" before the GPU is
// initialised), lower-cased.
func parseVBIOS(info string) (string, error) {
	for line := range strings.Lines(info) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) != "Video BIOS" {
			continue
		}
		v = strings.ToLower(strings.TrimSpace(v))
		if !vbiosShape(v) {
			return "", fmt.Errorf("Video BIOS %q: want five two-digit hex fields (96.00.5e.00.01)", v)
		}
		return v, nil
	}
	return "", errors.New("no Video BIOS line")
}

// vbiosShape reports whether v is five dot-separated two-digit hex fields.
func vbiosShape(v string) bool {
	fs := strings.Split(v, ".")
	if len(fs) != 5 {
		return false
	}
	for _, f := range fs {
		if len(f) != 2 {
			return false
		}
		if _, err := strconv.ParseUint(f, 16, 8); err != nil {
			return false
		}
	}
	return true
}

// podResources records the distribution's kubelet pod-resources socket
// and whether it exists (a fixture's socket is an empty file).
func podResources(s *session, d *facts.Distribution) {
	dist, err := platform.ParseDistribution(d.Name)
	if d.Name == "" || err != nil {
		return
	}
	d.PodResourcesSocket = dist.PodResourcesSocket()
	d.PodResourcesPresent = s.exists(strings.TrimPrefix(d.PodResourcesSocket, "/"))
}
