package discover

import (
	"strings"
	"testing"

	"berth.dev/berth/internal/host/facts"
)

// FuzzTEEBootLog feeds arbitrary boot logs through the same filter as
// discovery and both TEE parsers: they must not panic, and what they
// report must be internally consistent.
func FuzzTEEBootLog(f *testing.F) {
	f.Add("[ 13.7] ccp 0000:01:00.5: SEV-SNP API:1.55 build:38\nkvm_amd: SEV-SNP enabled (ASIDs 1 - 99)\n")
	f.Add("SEV supported: 410 ASIDs\nSEV-ES and SEV-SNP supported: 99 ASIDs\n")
	f.Add("virt/tdx: BIOS enabled: private KeyID range [64, 128)\nvirt/tdx: module initialized\n")
	f.Add("virt/tdx: TDX module 1.5.06.00, build number 744, build date 0134d817\ntdx: not enabled by BIOS.\n")
	f.Fuzz(func(t *testing.T, log string) {
		lines := filterBootLog(log)
		var snp facts.SNP
		parseSNPLog(lines, &snp)
		var tdx facts.TDX
		parseTDXLog(lines, &tdx)
		if r := tdx.BIOSKeyIDs; r != nil && r.Max < r.Min {
			t.Errorf("KeyID range %+v inverted", *r)
		}
		if tdx.ModuleInitialized != nil && *tdx.ModuleInitialized && tdx.ModuleError != "" {
			t.Errorf("initialised with error %q", tdx.ModuleError)
		}
		if snp.FirmwareVersion != "" && snp.FirmwareBuild == nil {
			t.Errorf("version %q without build", snp.FirmwareVersion)
		}
	})
}

// FuzzPCISysfs covers the PCI sysfs parsers: uevent, hex ids, vGPU types
// and etc/group.
func FuzzPCISysfs(f *testing.F) {
	f.Add("DRIVER=nvidia\nPCI_CLASS=30200\nPCI_ID=10DE:2331\nPCI_SUBSYS_ID=10DE:1626\n")
	f.Add("PCI_ID=zz\n")
	f.Add("ID    : vGPU Name\n1428 : NVIDIA H200X-141C\n")
	f.Add("root:x:0:\nkvm:x:108:alice\n")
	f.Fuzz(func(t *testing.T, text string) {
		var d facts.PCIDevice
		if err := parsePCIUevent([]byte(text), &d); err == nil {
			if len(d.Vendor) != 4 || len(d.Device) != 4 || len(d.Class) != 6 {
				t.Errorf("accepted %q as %+v", text, d)
			}
			if strings.ToLower(d.Vendor) != d.Vendor {
				t.Errorf("vendor %q not lower case", d.Vendor)
			}
		}
		for _, v := range parseVGPUTypes(text) {
			if !strings.Contains(v, ": ") {
				t.Errorf("vGPU type %q", v)
			}
		}
		for gid, name := range parseGroup(text) {
			if gid < 0 || name == "" {
				t.Errorf("group %d %q", gid, name)
			}
		}
	})
}

// FuzzKernelParams splits arbitrary command lines.
func FuzzKernelParams(f *testing.F) {
	f.Add(`BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt a="b c" -- init`)
	f.Add(`"unterminated`)
	f.Fuzz(func(t *testing.T, cmdline string) {
		for _, p := range kernelParams(cmdline) {
			if p == "--" {
				t.Errorf("kept the -- separator")
			}
		}
		for _, fl := range iommuFlags(cmdline) {
			if !strings.Contains(strings.ReplaceAll(fl, "-", "_"), "iommu") {
				t.Errorf("flag %q is not about the IOMMU", fl)
			}
		}
	})
}
