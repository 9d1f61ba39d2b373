package discover

import (
	"context"
	"reflect"
	"testing"

	"berth.dev/berth/internal/host/facts"
)

func TestKernelParams(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"ro quiet", []string{"ro", "quiet"}},
		{`a="b c"  d`, []string{"a=b c", "d"}},
		{"x -- init args", []string{"x"}},
		{"  \tintel_iommu=on\n", []string{"intel_iommu=on"}},
	} {
		if got := kernelParams(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("kernelParams(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIOMMUFlags(t *testing.T) {
	got := iommuFlags("BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt amd_iommu=off iommu.passthrough=1 iommufd=1 vfio-pci.ids=10de:2331 amd-iommu=on -- iommu=ignored")
	want := []string{"intel_iommu=on", "iommu=pt", "amd_iommu=off", "iommu.passthrough=1", "amd-iommu=on"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("iommuFlags = %q, want %q", got, want)
	}
}

func TestIOMMUSubsystem(t *testing.T) {
	t.Run("intel host with groups", func(t *testing.T) {
		s := openTree(t, map[string]string{
			"sys/firmware/acpi/tables/DMAR":                          "",
			"sys/kernel/iommu_groups/0/devices/0000:00:00.0":         "",
			"sys/kernel/iommu_groups/1/devices/0000:00:01.0":         "",
			"sys/kernel/iommu_groups/12/type":                        "DMA\n",
			"proc/cmdline":                                           "ro intel_iommu=on iommu=pt\n",
			"sys/module/vfio_iommu_type1/parameters/dma_entry_limit": "65535\n",
		})
		var f facts.Facts
		runIOMMU(context.Background(), s, &f)
		want := facts.IOMMU{ACPITable: "DMAR", Groups: 3, CmdlineFlags: []string{"intel_iommu=on", "iommu=pt"}, VFIODMAEntryLimit: ip(65535)}
		if !reflect.DeepEqual(f.IOMMU, want) || len(s.unknown) != 0 {
			t.Errorf("iommu = %s unknown %v", jsonString(t, f.IOMMU), s.unknown)
		}
	})
	t.Run("no IOMMU, module absent", func(t *testing.T) {
		s := openTree(t, map[string]string{
			"sys/firmware/acpi/tables/APIC": "",
			"sys/kernel/mm/.keep":           "",
			"proc/cmdline":                  "ro\n",
		})
		var f facts.Facts
		runIOMMU(context.Background(), s, &f)
		if !reflect.DeepEqual(f.IOMMU, facts.IOMMU{}) {
			t.Errorf("iommu = %s", jsonString(t, f.IOMMU))
		}
		want := map[string]string{"iommu.vfioDmaEntryLimit": "missing: vfio_iommu_type1 not loaded"}
		if u := unknownMap(s); !reflect.DeepEqual(u, want) {
			t.Errorf("unknown = %v", u)
		}
	})
	t.Run("empty root", func(t *testing.T) {
		s := openTree(t, map[string]string{"sys/module/vfio_iommu_type1/parameters/dma_entry_limit": "lots\n"})
		var f facts.Facts
		runIOMMU(context.Background(), s, &f)
		u := unknownMap(s)
		for _, k := range []string{"iommu.acpiTable", "iommu.groups", "iommu.cmdlineFlags", "iommu.vfioDmaEntryLimit"} {
			if u[k] == "" {
				t.Errorf("%s not recorded unknown: %v", k, u)
			}
		}
	})
}
