package discover

import (
	"testing"

	"berth.dev/berth/internal/host/facts"
)

func TestRunVirt(t *testing.T) {
	fcHeader := "DSDT\x53\x0f\x00\x00\x02\x77FIRECKFCVMDSDT\x00\x00\x00\x00FCAT\x19\x01\x24\x00"
	smbiosVM := make([]byte, 0x18)
	smbiosVM[1] = 0x18
	smbiosVM[0x13] = 0x10
	tests := []struct {
		name  string
		files map[string]string
		guest *bool
		hyp   string
	}{
		{"firecracker with ACPI", map[string]string{
			"proc/cpuinfo":                  "processor : 0\nflags : fpu hypervisor\n",
			"sys/firmware/acpi/tables/DSDT": fcHeader,
		}, boolp(true), "firecracker"},
		{"firecracker without ACPI", map[string]string{
			"proc/cpuinfo": "processor : 0\nflags : fpu hypervisor\n",
			"proc/cmdline": "console=ttyS0 virtio_mmio.device=4K@0xd0000000:5",
			"sys/bus/x":    "",
		}, boolp(true), "firecracker"},
		{"cloud hypervisor", map[string]string{
			"proc/cpuinfo":                     "processor : 0\nflags : fpu hypervisor\n",
			"sys/class/dmi/id/sys_vendor":      "Cloud Hypervisor\n",
			"sys/class/dmi/id/product_name":    "cloud-hypervisor\n",
			"sys/firmware/dmi/entries/0-0/raw": string(smbiosVM),
		}, boolp(true), "cloud-hypervisor"},
		{"qemu", map[string]string{
			"proc/cpuinfo":                  "processor : 0\nflags : fpu hypervisor\n",
			"sys/class/dmi/id/sys_vendor":   "QEMU\n",
			"sys/class/dmi/id/product_name": "Standard PC (Q35 + ICH9, 2009)\n",
		}, boolp(true), "qemu"},
		{"ec2 metal", map[string]string{
			"proc/cpuinfo":                  "processor : 0\nflags : fpu vmx\n",
			"sys/class/dmi/id/sys_vendor":   "Amazon EC2\n",
			"sys/class/dmi/id/product_name": "m7i.metal-24xl\n",
		}, boolp(false), ""},
		{"bare metal", map[string]string{
			"proc/cpuinfo":                "processor : 0\nflags : fpu svm sev\n",
			"sys/class/dmi/id/sys_vendor": "Dell Inc.\n",
		}, boolp(false), ""},
		{"no cpuinfo", map[string]string{"etc/hostname": "x"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, u := runSub(t, coreRoot(t, tt.files), runVirt)
			v := f.Virt
			if (v.Guest == nil) != (tt.guest == nil) || (v.Guest != nil && *v.Guest != *tt.guest) || v.Hypervisor != tt.hyp {
				t.Errorf("guest=%v hypervisor=%q evidence=%v unknown=%v; want guest=%v hypervisor=%q", deref(v.Guest), v.Hypervisor, v.Evidence, u, deref(tt.guest), tt.hyp)
			}
			if tt.guest == nil && u["virt.guest"] == "" {
				t.Errorf("unknown guest without reason")
			}
		})
	}
}

func TestParseDMI(t *testing.T) {
	if d := parseDMI(facts.DMI{SysVendor: "Microsoft Corporation", ProductName: "Virtual Machine"}); d.hypervisor != "microsoft" {
		t.Errorf("hyper-v: %+v", d)
	}
	if d := parseDMI(facts.DMI{SysVendor: "Microsoft Corporation", ProductName: "Surface Pro"}); d.hypervisor != "" {
		t.Errorf("surface is not a VM: %+v", d)
	}
}

func boolp(b bool) *bool { return &b }

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

func FuzzParseDMI(f *testing.F) {
	f.Add("QEMU", "Standard PC", []byte{0, 0x18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}, []byte("DSDT\x00\x00\x00\x00\x02\x00FIRECKFCVMDSDT"))
	f.Fuzz(func(t *testing.T, vendor, product string, smbios, acpi []byte) {
		parseDMI(facts.DMI{SysVendor: vendor, ProductName: product})
		parseSMBIOSVMBit(smbios)
		if id, ok := parseACPIOEMID(acpi); ok && (id == "" || len(id) > 6) {
			t.Fatalf("bad OEM ID %q", id)
		}
	})
}
