package discover

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/testkit/goldenfile"
)

// pciIDsExcerpt is a cut of the real pci.ids format: vendors, devices,
// a subsystem line and the class section.
const pciIDsExcerpt = `# List of PCI ID's
#	Syntax:
#	vendor  vendor_name
#		device  device_name				<-- single tab
1002  Advanced Micro Devices, Inc. [AMD/ATI]
	74a1  Aqua Vanjaram [Instinct MI300X]
10de  NVIDIA Corporation
	2330  GH100 [H100 SXM5 80GB]
	2331  GH100 [H100 PCIe]
		10de 1626  H100 PCIe
	22a3  GH100 [H100 SXM5 HD Audio]
	2901  GB100 [B200]
1a03  ASPEED Technology, Inc.
	2000  ASPEED Graphics Family
8086  Intel Corporation
	2030  Sky Lake-E PCI Express Root Port A
	1572  Ethernet Controller X710 for 10GbE SFP+
C 00  Unclassified device
	00  Non-VGA unclassified device
`

// gpuHost is a PCI tree with the cases that matter for passthrough:
//   - 41:00.0 H100 on vfio-pci, alone in group 40 with a root port
//     (isolated), described by separate vendor/device/class files;
//   - c1:00.0 H100 PCIe on nvidia in group 7, sharing it with its audio
//     function (nvidia driver) and a NIC: not isolated;
//   - 02:00.0 ASPEED BMC VGA: not a GPU;
//   - 81:00.0 B200 via uevent, no IOMMU group;
//   - 85:00.0 AMD MI300X (class 1200), SR-IOV PF with VFs;
//   - e1:00.0 a NIC with SR-IOV and mdev types.
func gpuHost() map[string]string {
	const d = "sys/bus/pci/devices/"
	const g = "->../../../kernel/iommu_groups/"
	return map[string]string{
		"sys/bus/.keep":                                                    "",
		"usr/share/misc/pci.ids":                                           pciIDsExcerpt,
		d + "0000:40:01.1/vendor":                                          "0x8086\n",
		d + "0000:40:01.1/device":                                          "0x2030\n",
		d + "0000:40:01.1/class":                                           "0x060400\n",
		d + "0000:40:01.1/driver":                                          "->../../../bus/pci/drivers/pcieport",
		d + "0000:40:01.1/iommu_group":                                     g + "40",
		d + "0000:40:01.1/numa_node":                                       "0\n",
		d + "0000:41:00.0/vendor":                                          "0x10de\n",
		d + "0000:41:00.0/device":                                          "0x2330\n",
		d + "0000:41:00.0/class":                                           "0x030200\n",
		d + "0000:41:00.0/driver":                                          "->../../../bus/pci/drivers/vfio-pci",
		d + "0000:41:00.0/iommu_group":                                     g + "40",
		d + "0000:41:00.0/numa_node":                                       "0\n",
		d + "0000:c1:00.0/uevent":                                          "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2331\nPCI_SUBSYS_ID=10DE:1626\nPCI_SLOT_NAME=0000:c1:00.0\n",
		d + "0000:c1:00.0/iommu_group":                                     g + "7",
		d + "0000:c1:00.0/numa_node":                                       "-1\n",
		d + "0000:c1:00.1/uevent":                                          "DRIVER=snd_hda_intel\nPCI_CLASS=40300\nPCI_ID=10DE:22A3\n",
		d + "0000:c1:00.1/iommu_group":                                     g + "7",
		d + "0000:c2:00.0/uevent":                                          "DRIVER=i40e\nPCI_CLASS=20000\nPCI_ID=8086:1572\n",
		d + "0000:c2:00.0/iommu_group":                                     g + "7",
		d + "0000:02:00.0/uevent":                                          "DRIVER=ast\nPCI_CLASS=30000\nPCI_ID=1A03:2000\n",
		d + "0000:81:00.0/uevent":                                          "PCI_CLASS=30200\nPCI_ID=10DE:2901\n",
		d + "0000:85:00.0/uevent":                                          "DRIVER=amdgpu\nPCI_CLASS=120000\nPCI_ID=1002:74A1\n",
		d + "0000:85:00.0/sriov_totalvfs":                                  "8\n",
		d + "0000:85:00.0/sriov_numvfs":                                    "0\n",
		d + "0000:85:00.0/iommu_group":                                     g + "12",
		d + "0000:e1:00.0/uevent":                                          "DRIVER=i40e\nPCI_CLASS=20000\nPCI_ID=8086:1572\n",
		d + "0000:e1:00.0/sriov_totalvfs":                                  "64\n",
		d + "0000:e1:00.0/sriov_numvfs":                                    "4\n",
		"sys/class/mdev_bus/0000:e1:00.0/mdev_supported_types/i40e-1/name": "VF slice\n",
		d + "0000:41:00.4/uevent":                                          "DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2330\n",
		d + "0000:41:00.4/nvidia/creatable_vgpu_types":                     "ID    : vGPU Name\n1428 : NVIDIA H200X-141C\n1414 : NVIDIA H200X-1-18C\n",
		d + "0000:41:00.4/iommu_group":                                     g + "41",
		d + "0000:99:00.0/uevent":                                          "PCI_ID=zz\n",
		"sys/kernel/iommu_groups/40/devices/0000:41:00.0":                  "",
	}
}

func TestPCISubsystemGolden(t *testing.T) {
	s := openTree(t, gpuHost())
	var f facts.Facts
	runPCI(context.Background(), s, &f)
	goldenfile.AssertJSON(t, "testdata/pci/gpu_host.json", struct {
		PCI     []facts.PCIDevice `json:"pci"`
		GPUs    []facts.GPU       `json:"gpus"`
		Unknown []facts.Missing   `json:"unknown"`
	}{f.PCI, f.GPUs, s.unknown})

	// The behaviour the golden file shows, asserted explicitly.
	byAddr := map[string]facts.GPU{}
	for _, g := range f.GPUs {
		byAddr[g.Address] = g
	}
	if len(f.GPUs) != 5 {
		t.Errorf("want 5 GPUs (not the ASPEED VGA), got %d", len(f.GPUs))
	}
	if g := byAddr["0000:41:00.0"]; !g.VFIOBound || !g.ConfidentialCapable || g.GroupIsolated == nil || !*g.GroupIsolated || g.Model != "GH100 [H100 SXM5 80GB]" {
		t.Errorf("41:00.0 = %s", jsonString(t, g))
	}
	if g := byAddr["0000:c1:00.0"]; g.VFIOBound || g.GroupIsolated == nil || *g.GroupIsolated ||
		!reflect.DeepEqual(g.GroupMembers, []string{"0000:c1:00.1", "0000:c2:00.0"}) {
		t.Errorf("c1:00.0 = %s", jsonString(t, g))
	}
	if g := byAddr["0000:81:00.0"]; !g.ConfidentialCapable || g.GroupIsolated != nil {
		t.Errorf("81:00.0 (B200, no group) = %s", jsonString(t, g))
	}
	if g := byAddr["0000:85:00.0"]; g.Vendor != "amd" || g.ConfidentialCapable {
		t.Errorf("85:00.0 (MI300X) = %s", jsonString(t, g))
	}
	u := unknownMap(s)
	for k := range u {
		// The CC modes and VBIOS versions of the GPUs are unknown on an
		// offline root without a recorded BAR0 probe (gpucc_test.go).
		if strings.HasPrefix(k, "gpus") {
			delete(u, k)
		}
	}
	if len(u) != 1 || u["pci[0000:99:00.0]"] == "" {
		t.Errorf("unknown = %v, want only the malformed 99:00.0", u)
	}
}

func TestPCINamesFromOptions(t *testing.T) {
	files := gpuHost()
	delete(files, "usr/share/misc/pci.ids")
	ids := filepath.Join(t.TempDir(), "pci.ids")
	if err := os.WriteFile(ids, []byte(pciIDsExcerpt), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		opt  string
		want string
	}{{"", ""}, {ids, "NVIDIA Corporation"}, {ids + ".missing", ""}} {
		s := openTree(t, files)
		s.opt.PCIIDs = tt.opt
		var f facts.Facts
		runPCI(context.Background(), s, &f)
		if got := f.PCI[2].VendorName; got != tt.want {
			t.Errorf("PCIIDs=%q: %s vendor name %q, want %q", tt.opt, f.PCI[2].Address, got, tt.want)
		}
	}
}

func TestPCINoBus(t *testing.T) {
	// A microVM without PCI: an empty list, nothing unknown.
	s := openTree(t, map[string]string{"sys/bus/virtio/.keep": ""})
	var f facts.Facts
	runPCI(context.Background(), s, &f)
	if f.PCI != nil || f.GPUs != nil || len(s.unknown) != 0 {
		t.Errorf("pci %v gpus %v unknown %v", f.PCI, f.GPUs, s.unknown)
	}
	// No sys at all: unknown.
	s = openTree(t, map[string]string{"etc/hostname": "x\n"})
	runPCI(context.Background(), s, &f)
	if u := unknownMap(s); u["pci"] != "missing: sys/bus/pci/devices" {
		t.Errorf("unknown = %v", u)
	}
}

func TestPCIHex(t *testing.T) {
	for _, tt := range []struct {
		in    string
		width int
		want  string
		ok    bool
	}{
		{"0x10DE", 4, "10de", true}, {"20000", 6, "020000", true}, {"0x060400", 6, "060400", true},
		{"", 4, "", false}, {"0x", 4, "", false}, {"12345", 4, "", false}, {"xyz", 4, "", false},
	} {
		got, err := pciHex(tt.in, tt.width)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("pciHex(%q, %d) = %q, %v", tt.in, tt.width, got, err)
		}
	}
}

func TestConfidentialCapable(t *testing.T) {
	for _, tt := range []struct {
		vendor, device string
		want           bool
	}{
		{"10de", "2330", true}, {"10de", "22f0", true}, {"10de", "237f", true}, {"10de", "2380", false},
		{"10de", "2901", true}, {"10de", "297f", true}, {"10de", "2980", false}, {"10de", "20b0", false},
		{"1002", "2330", false}, {"10de", "zzzz", false},
	} {
		if got := confidentialCapable(tt.vendor, tt.device); got != tt.want {
			t.Errorf("confidentialCapable(%s, %s) = %v", tt.vendor, tt.device, got)
		}
	}
}
