package catalog

import (
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

func iommuChecks() []check.Check {
	return nodeArea([]check.Check{{
		ID:        "iommu.enabled",
		Title:     "if the IOMMU is enabled by the kernel",
		Why:       "Passing a GPU to a VM with VFIO needs the IOMMU on, so that the device can only reach the guest's memory.",
		Reads:     []string{"iommu.groups", "iommu.acpiTable", "iommu.cmdlineFlags"},
		Platforms: "gpu platforms",
		Remedies: []string{
			"enable VT-d (Intel) or AMD-Vi/IOMMU (AMD) in the BIOS",
			"add intel_iommu=on (Intel) or amd_iommu=on (AMD), and iommu=pt, to the kernel command line and reboot",
		},
		Applies: check.When(check.Blocking, isGPU),
		Run: func(f *facts.Facts) check.Result {
			ev := []check.Evidence{check.Ev("iommu.acpiTable", f.IOMMU.ACPITable), check.Ev("iommu.groups", f.IOMMU.Groups), check.Ev("iommu.cmdlineFlags", f.IOMMU.CmdlineFlags)}
			switch {
			case f.IOMMU.Groups > 0:
				return check.Ok(itoa(f.IOMMU.Groups)+" IOMMU groups", ev...)
			case f.IOMMU.ACPITable == "":
				return check.Failed("no DMAR/IVRS ACPI table: the IOMMU is disabled in the BIOS or not supported",
					"enable VT-d (Intel) or AMD-Vi/IOMMU (AMD) in the BIOS", ev...)
			}
			param := "intel_iommu=on"
			if f.IOMMU.ACPITable == "IVRS" {
				param = "amd_iommu=on"
			}
			if off := iommuOffFlags(f.IOMMU.CmdlineFlags); len(off) > 0 {
				return check.Failed(f.IOMMU.ACPITable+" table present (the BIOS has the IOMMU on) but the kernel command line turns it off ("+strings.Join(off, " ")+"): no IOMMU groups, so no device can be passed to a VM",
					"remove "+strings.Join(off, " ")+" from the kernel command line (add "+param+" iommu=pt if the distribution's default is off) and reboot", ev...)
			}
			return check.Failed(f.IOMMU.ACPITable+" table present but no IOMMU groups: the kernel did not enable the IOMMU",
				"add "+param+" iommu=pt to the kernel command line and reboot", ev...)
		},
	}})
}
