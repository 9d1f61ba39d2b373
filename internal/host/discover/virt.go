package discover

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"

	"berth.dev/berth/internal/host/facts"
)

// dmiDir holds the DMI strings the kernel exports.
const dmiDir = "sys/class/dmi/id/"

// smbiosType0 is the raw SMBIOS BIOS Information structure.
const smbiosType0 = "sys/firmware/dmi/entries/0-0/raw"

// acpiTablesForOEM are read (only their 36-byte header) for the OEM ID.
var acpiTablesForOEM = []string{"sys/firmware/acpi/tables/DSDT", "sys/firmware/acpi/tables/FACP"}

// cpuidHypervisors maps the CPUID leaf 0x40000000 signature to a
// hypervisor (systemd's virt.c table).
var cpuidHypervisors = map[string]string{
	"KVMKVMKVM":    "kvm",
	"Linux KVM Hv": "kvm",
	"TCGTCGTCGTCG": "qemu",
	"VMwareVMware": "vmware",
	"Microsoft Hv": "microsoft",
	"XenVMMXenVMM": "xen",
	"bhyve bhyve":  "bhyve",
	"ACRNACRNACRN": "acrn",
	"QNXQVMBSQG":   "qnx",
	"Apple VZ":     "apple",
}

// dmiHypervisors maps DMI string prefixes to hypervisors, checked in
// product_name, sys_vendor, board_vendor, bios_vendor order (systemd's
// table plus Cloud Hypervisor).
var dmiHypervisors = []struct{ prefix, name string }{
	{"KVM", "kvm"},
	{"OpenStack", "kvm"},
	{"KubeVirt", "kvm"},
	{"Amazon EC2", "amazon"},
	{"QEMU", "qemu"},
	{"VMware", "vmware"},
	{"VMW", "vmware"},
	{"innotek GmbH", "virtualbox"},
	{"VirtualBox", "virtualbox"},
	{"Oracle Corporation", "virtualbox"},
	{"Xen", "xen"},
	{"Bochs", "qemu"},
	{"Parallels", "parallels"},
	{"BHYVE", "bhyve"},
	{"Hyper-V", "microsoft"},
	{"Apple Virtualization", "apple"},
	{"Google Compute Engine", "google"},
	{"Google", "google"},
	{"Cloud Hypervisor", "cloud-hypervisor"},
	{"cloud-hypervisor", "cloud-hypervisor"},
}

// dmiInfo is what parseDMI extracts.
type dmiInfo struct {
	dmi        facts.DMI
	hypervisor string
	metal      bool
}

// parseDMI classifies the DMI strings. Microsoft hosts are only VMs when
// the product says "Virtual Machine" (Surface and Azure hosts are Microsoft
// too); Amazon EC2 ".metal" instances are bare metal.
func parseDMI(d facts.DMI) dmiInfo {
	di := dmiInfo{dmi: d}
	for _, v := range []string{d.ProductName, d.SysVendor, d.BoardVendor, d.BIOSVendor} {
		for _, h := range dmiHypervisors {
			if strings.HasPrefix(v, h.prefix) {
				di.hypervisor = h.name
				break
			}
		}
		if di.hypervisor != "" {
			break
		}
	}
	if di.hypervisor == "" && strings.HasPrefix(d.SysVendor, "Microsoft Corporation") && strings.Contains(d.ProductName, "Virtual Machine") {
		di.hypervisor = "microsoft"
	}
	if di.hypervisor == "amazon" && strings.Contains(d.ProductName, ".metal") {
		di.hypervisor, di.metal = "", true
	}
	return di
}

// parseSMBIOSVMBit reads the "is a virtual machine" bit (bit 4 of BIOS
// characteristics extension byte 2, offset 0x13) from a raw SMBIOS type 0
// structure; ok is false when the structure is not type 0 or too short to
// have that byte.
func parseSMBIOSVMBit(raw []byte) (vm bool, ok bool) {
	if len(raw) < 2 || raw[0] != 0 {
		return false, false
	}
	length := int(raw[1])
	if length < 0x14 || len(raw) < 0x14 {
		return false, false
	}
	return raw[0x13]&0x10 != 0, true
}

// parseACPIOEMID returns the 6-byte OEM ID of an ACPI table header
// (signature 4, length 4, revision 1, checksum 1, OEM ID 6), trimmed.
func parseACPIOEMID(hdr []byte) (string, bool) {
	if len(hdr) < 16 {
		return "", false
	}
	id := strings.TrimRight(string(hdr[10:16]), " \x00")
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] > 0x7e {
			return "", false
		}
	}
	return id, id != ""
}

// readHeader reads the first n bytes of a file (ACPI tables can be large).
func (s *session) readHeader(path string, n int) ([]byte, error) {
	f, err := s.root.FS().Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	m, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, err
	}
	return b[:m], nil
}

func runVirt(_ context.Context, s *session, f *facts.Facts) {
	v := &f.Virt
	ci, cpuOK := s.procCPUInfo()
	hypFlag := cpuOK && ci.flags["hypervisor"]
	if hypFlag {
		v.Evidence = append(v.Evidence, "cpuinfo flag hypervisor")
	}

	// DMI strings.
	_, dmiErr := s.root.FS().Stat(strings.TrimSuffix(dmiDir, "/"))
	hasDMI := dmiErr == nil
	if hasDMI {
		rd := func(name string) string { str, _ := s.readString("", dmiDir+name); return str }
		v.DMI = facts.DMI{
			SysVendor: rd("sys_vendor"), ProductName: rd("product_name"),
			BoardVendor: rd("board_vendor"), BIOSVendor: rd("bios_vendor"), BIOSVersion: rd("bios_version"),
		}
	}
	di := parseDMI(v.DMI)
	if di.hypervisor != "" {
		v.Evidence = append(v.Evidence, "DMI "+dmiEvidence(v.DMI))
	}
	if raw, err := s.root.FS().ReadFile(smbiosType0); err == nil {
		if vm, ok := parseSMBIOSVMBit(raw); ok {
			v.SMBIOSVMBit = &vm
			if vm {
				v.Evidence = append(v.Evidence, "SMBIOS VM bit")
			}
		}
	}
	if t, ok := s.readString("", "sys/hypervisor/type"); ok && t != "" {
		v.SysHypervisorType = t
		v.Evidence = append(v.Evidence, "sys/hypervisor/type "+t)
	}
	for _, p := range acpiTablesForOEM {
		if hdr, err := s.readHeader(p, 36); err == nil {
			if id, ok := parseACPIOEMID(hdr); ok {
				v.ACPIOEMID = id
				break
			}
		}
	}
	var cpuidHyp string
	if c := s.cpuidView(); c != nil && c.HypervisorVendor != "" {
		cpuidHyp = cpuidHypervisors[strings.TrimSpace(c.HypervisorVendor)]
		if cpuidHyp == "" {
			cpuidHyp = "unknown"
		}
		v.Evidence = append(v.Evidence, "CPUID hypervisor signature "+strings.TrimSpace(c.HypervisorVendor))
	}

	// Firecracker writes no SMBIOS tables; recent versions have ACPI with
	// OEM ID FIRECK, older ones hand virtio-mmio devices over the kernel
	// command line.
	firecracker := v.ACPIOEMID == "FIRECK"
	if firecracker {
		v.Evidence = append(v.Evidence, "ACPI OEM ID FIRECK")
	} else if !hasDMI && hypFlag {
		if cl, ok := s.procCmdline(); ok && strings.Contains(cl, "virtio_mmio.device=") {
			firecracker = true
			v.Evidence = append(v.Evidence, "no DMI and virtio_mmio.device= on the kernel command line")
		}
	}

	guest := hypFlag || di.hypervisor != "" || (v.SMBIOSVMBit != nil && *v.SMBIOSVMBit) || cpuidHyp != "" || firecracker ||
		(v.SysHypervisorType != "" && v.SysHypervisorType != "xen")
	switch {
	case guest:
		v.Guest = &guest
		switch {
		case firecracker:
			v.Hypervisor = "firecracker"
		case di.hypervisor != "":
			v.Hypervisor = di.hypervisor
		case cpuidHyp != "":
			v.Hypervisor = cpuidHyp
		case v.SysHypervisorType != "":
			v.Hypervisor = v.SysHypervisorType
		default:
			v.Hypervisor = "unknown"
		}
	case cpuOK && (hasDMI || di.metal || s.root.Live()):
		// No hypervisor flag, no VM DMI: the kernel sets the flag in every
		// VM that exposes CPUID's hypervisor bit, so this is bare metal.
		v.Guest = &guest
		v.Evidence = append(v.Evidence, "no hypervisor flag in cpuinfo")
	case cpuOK && !hasDMI:
		if _, err := s.root.FS().Stat("sys"); errors.Is(err, fs.ErrNotExist) {
			s.unknownf("virt.guest", "%s: sys (cannot check DMI)", facts.ReasonMissing)
			return
		}
		v.Guest = &guest
		v.Evidence = append(v.Evidence, "no hypervisor flag in cpuinfo")
	default:
		s.unknownf("virt.guest", "%s: proc/cpuinfo", facts.ReasonMissing)
	}
}

func dmiEvidence(d facts.DMI) string {
	parts := []string{}
	if d.SysVendor != "" {
		parts = append(parts, d.SysVendor)
	}
	if d.ProductName != "" {
		parts = append(parts, d.ProductName)
	}
	return strings.Join(parts, " / ")
}
