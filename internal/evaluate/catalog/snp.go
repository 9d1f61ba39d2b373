package catalog

import (
	"fmt"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

const snpASIDRemedy = "in the BIOS give ASIDs to SEV-ES/SNP: raise \"SEV-ES ASID space limit\" / \"minimum SEV non-ES ASID\" (or set \"SNP ASID count\") above 1, e.g. 100, and reboot; kvm_amd.sev_es/sev_snp then come on by themselves"

const snpBIOSRemedy = "in the BIOS enable SMEE (Secure Memory Encryption), SEV-SNP support, SNP Memory Coverage and IOMMU, and set \"SEV-ES ASID space limit\" (minimum SEV non-ES ASID) above 1"

func snpChecks() []check.Check {
	// The CPU generation is the node's; the rest is the host side of
	// SEV-SNP on KVM.
	snpCPU := onNode(check.When(check.Blocking, isSNP))
	snp := onKVMHost(check.When(check.Blocking, isSNP))
	return []check.Check{{
		ID:        "snp.cpu.generation",
		Title:     "for an SEV-SNP capable AMD EPYC",
		Why:       "SEV-SNP exists from AMD EPYC Milan (Zen 3) on; Naples and Rome have only SEV and SEV-ES. A platform pinned to a product line needs that line.",
		Parent:    "virt.guest.tee",
		Reads:     []string{"cpu.vendor", "cpu.productLine"},
		Platforms: "snp platforms",
		Remedies:  []string{"use an AMD EPYC Milan, Genoa (Bergamo, Siena) or Turin host", "pick the platform whose product line matches the CPU (e.g. -genoa on a Genoa host)"},
		Applies:   snpCPU,
		Key:       keyProductLine,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			ev := []check.Evidence{check.Ev("cpu.vendor", f.CPU.Vendor), check.Ev("cpu.productLine", f.CPU.ProductLine), check.Ev("cpu.modelName", f.CPU.ModelName)}
			if f.CPU.Vendor != "amd" {
				return check.Failed("not an AMD CPU ("+orDefault(f.CPU.VendorID, f.CPU.Vendor)+"): SEV-SNP needs AMD EPYC", "use an AMD EPYC Milan or newer host, or a TDX platform on Intel", ev...)
			}
			line, ok := platform.ProductLineOfCPU(f.CPU.ProductLine)
			if !ok {
				return check.Failed("CPU "+orDefault(f.CPU.ProductLine, orDefault(f.CPU.ModelName, "unknown model"))+" has no SEV-SNP (needs EPYC Milan or newer)", "use an AMD EPYC Milan, Genoa or Turin host", ev...)
			}
			if want := p.ProductLine(); want.Pinned() && want != line {
				return check.Failed("platform is pinned to "+want.String()+" but this CPU is "+f.CPU.ProductLine,
					"choose the "+line.String()+" variant of the platform", ev...)
			}
			return check.Ok("EPYC "+f.CPU.ProductLine, ev...)
		},
	}, {
		ID:        "snp.kernel.version",
		Title:     "for a host kernel with SEV-SNP support",
		Why:       "Only a kernel with SEV-SNP host support (upstream Linux 6.11, or a vendor SNP kernel) sets up the RMP, reports the SNP firmware and ASIDs and has kvm_amd.sev_snp; without it none of the BIOS state can be seen, so this comes before every BIOS and firmware check.",
		Parent:    "snp.cpu.generation",
		Reads:     []string{"kernel.release"},
		Platforms: "snp platforms",
		Remedies:  []string{"install a kernel >= 6.11 (distribution HWE/backports kernel), or keep a vendor SNP kernel you trust"},
		Applies:   snp,
		Run: func(f *facts.Facts) check.Result {
			// An older kernel passes as a vendor SNP kernel when
			// kvm_amd.sev_snp is on; with kvm_amd not loaded nobody
			// could look. (A loaded kvm_amd without the parameter is a
			// kernel without SNP, which discovery also lists as unknown.)
			if u, ok := unknownOf(f, "tee.snp.kvmSevSnp"); ok && !module(f, "kvm_amd").Present() {
				if v, ok := parseVersion(f.Kernel.Release); ok && !v.atLeast(6, 11) {
					return check.Unsure("kernel "+f.Kernel.Release+" predates upstream SNP host support (6.11), and whether it is a vendor SNP kernel is not known (kvm_amd not loaded)", check.Ev("kernel.release", f.Kernel.Release), u)
				}
			}
			return kernelAtLeast(f, f.Kernel.Release, 6, 11, "SNP", yes(f.TEE.SNP.KVMSEVSNP))
		},
	}, {
		ID:        "snp.bios.rmp",
		Title:     "if the BIOS reserved the RMP table",
		Why:       "SNP tracks page ownership in the Reverse Map Table, which the BIOS must reserve at boot (\"SNP Memory Coverage\").",
		Parent:    "snp.kernel.version",
		Reads:     []string{"tee.snp.rmpReserved"},
		Platforms: "snp platforms",
		Remedies:  []string{"set SNP Memory Coverage to Enabled in the BIOS and reboot"},
		Applies:   snp,
		Run: func(f *facts.Facts) check.Result {
			r := f.TEE.SNP.RMPReserved
			ev := check.Ev("tee.snp.rmpReserved", r)
			switch {
			case r == nil:
				return check.Unsure("the boot log does not say whether the RMP table was reserved", ev)
			case !*r:
				return check.Failed("\"Memory for the RMP table has not been reserved by BIOS\"", "set SNP Memory Coverage to Enabled in the BIOS and reboot", ev)
			}
			return check.Ok("RMP table reserved", ev)
		},
	}, {
		ID:        "snp.bios.enabled",
		Title:     "if SEV-SNP is enabled in the BIOS",
		Why:       "The kernel clears the sev, sev_es and sev_snp cpu flags when memory encryption or SNP is off in the firmware (and sev_snp when the BIOS reserved no RMP, hence after snp.bios.rmp); on an EPYC that is a BIOS setting, not missing hardware.",
		Parent:    "snp.bios.rmp",
		Reads:     []string{"cpu.flags"},
		Platforms: "snp platforms",
		Remedies:  []string{snpBIOSRemedy},
		Applies:   snp,
		Run: func(f *facts.Facts) check.Result {
			var missing []string
			for _, fl := range []string{"sme", "sev", "sev_es", "sev_snp"} {
				if !f.CPU.HasFlag(fl) {
					missing = append(missing, fl)
				}
			}
			ev := check.Ev("cpu.flags(sev)", missing)
			if len(missing) > 0 {
				return check.Failed("cpu flags missing: "+strings.Join(missing, " ")+": SEV-SNP is disabled in the BIOS", snpBIOSRemedy, ev)
			}
			return check.Ok("sme sev sev_es sev_snp flags present")
		},
	}, {
		ID:        "snp.iommu",
		Title:     "for IOMMU SEV-SNP support",
		Why:       "The host kernel enables SNP only when the AMD IOMMU supports it (\"AMD-Vi: IOMMU SNP support enabled\"); with the IOMMU off or in passthrough-only mode SNP stays off.",
		Parent:    "snp.bios.enabled",
		Reads:     []string{"tee.snp.iommuSnp", "iommu.cmdlineFlags", "iommu.groups"},
		Platforms: "snp platforms",
		Remedies:  []string{"enable the IOMMU in the BIOS and do not boot with amd_iommu=off, iommu=off or iommu=pt"},
		Applies:   snp,
		Run: func(f *facts.Facts) check.Result {
			v := f.TEE.SNP.IOMMUSNP
			ev := []check.Evidence{check.Ev("tee.snp.iommuSnp", v), check.Ev("iommu.cmdlineFlags", f.IOMMU.CmdlineFlags), check.Ev("iommu.groups", f.IOMMU.Groups)}
			off := iommuOffFlags(f.IOMMU.CmdlineFlags)
			switch {
			case v == nil && len(off) > 0:
				// With the IOMMU off the AMD IOMMU driver never reaches
				// iommu_snp_enable, so it prints nothing about SNP, and
				// snp_rmptable_init (arch/x86/virt/svm/sev.c) turns SNP
				// off because amd_iommu_snp_en is false.
				return check.Failed("the kernel command line turns the IOMMU off ("+strings.Join(off, " ")+"), and the kernel enables SEV-SNP only with the IOMMU on: kvm_amd's sev_snp=N is its symptom",
					"remove "+strings.Join(off, " ")+" from the kernel command line (GPU passthrough needs the IOMMU too) and reboot", ev...)
			case v == nil && f.IOMMU.ACPITable == "IVRS" && f.IOMMU.Groups == 0:
				return check.Failed("the IVRS table is there but the kernel has no IOMMU groups: the IOMMU is off, and the kernel enables SEV-SNP only with the IOMMU on",
					"enable the IOMMU in the BIOS and do not boot with amd_iommu=off or iommu=off", ev...)
			case v == nil:
				return check.Unsure("the boot log does not mention IOMMU SNP support", ev...)
			case !*v:
				msg, remedy := "IOMMU SNP support is not enabled", "enable the IOMMU in the BIOS; remove amd_iommu=off / iommu=off from the kernel command line"
				if pt := iommuPassthroughFlags(f.IOMMU.CmdlineFlags); len(pt) > 0 {
					// iommu_snp_enable (drivers/iommu/amd/init.c) refuses
					// SNP when the default domain is passthrough.
					msg = "the IOMMU is in passthrough mode (" + strings.Join(pt, " ") + "), and the kernel refuses SEV-SNP then (\"SNP: IOMMU disabled or configured in passthrough mode, SNP cannot be supported\")"
					remedy = "remove " + strings.Join(pt, " ") + " from the kernel command line (VFIO passthrough does not need it) and reboot"
				}
				return check.Failed(msg, remedy, ev...)
			}
			return check.Ok("AMD-Vi: IOMMU SNP support enabled", ev...)
		},
	}, {
		ID:        "snp.firmware.version",
		Title:     "for SEV firmware >= 1.51",
		Why:       "The kernel's SNP host support needs SEV-SNP firmware (PSP) API 1.51 or newer; older firmware leaves SNP disabled.",
		Parent:    "snp.bios.enabled",
		Reads:     []string{"tee.snp.firmwareVersion", "tee.snp.firmwareTooOld"},
		Platforms: "snp platforms",
		Remedies:  []string{"update the BIOS (it carries the PSP firmware), or load a newer SEV firmware from linux-firmware (amd/amd_sev_fam19h_model*.sbin)"},
		Applies:   snp,
		Run: func(f *facts.Facts) check.Result {
			s := f.TEE.SNP
			ev := check.Ev("tee.snp.firmwareVersion", s.FirmwareVersion)
			v, ok := parseVersion(s.FirmwareVersion)
			switch {
			case s.FirmwareTooOld:
				return check.Failed("the kernel says SNP needs firmware >= 1.51 (have "+orDefault(s.FirmwareVersion, "older")+")", "update the BIOS or install newer SEV firmware (linux-firmware amd/amd_sev_fam19h_*.sbin)", ev)
			case !ok:
				return check.Unsure("no SEV-SNP firmware version in the boot log", ev)
			case !v.atLeast(1, 51):
				return check.Failed("SEV-SNP firmware "+s.FirmwareVersion+" is older than 1.51", "update the BIOS or install newer SEV firmware (linux-firmware amd/amd_sev_fam19h_*.sbin)", ev)
			}
			return check.Ok("SEV-SNP API "+s.FirmwareVersion, ev)
		},
	}, {
		ID:        "snp.asids",
		Title:     "for SEV-SNP ASIDs (BIOS ASID split)",
		Why:       "Each SNP guest needs an SEV-ES/SNP ASID; the BIOS splits the ASIDs between plain SEV and SEV-ES/SNP, and when it gives every ASID to plain SEV (minimum SEV non-ES ASID = 1) none are left for SNP and kvm_amd turns sev_es and sev_snp off by itself, so this comes before the kvm_amd parameters.",
		Parent:    "snp.bios.enabled",
		Reads:     []string{"tee.snp.snpAsids", "tee.snp.sevAsids"},
		Platforms: "snp platforms",
		Remedies:  []string{snpASIDRemedy},
		Applies:   snp,
		Run: func(f *facts.Facts) check.Result {
			s := f.TEE.SNP
			ev := []check.Evidence{check.Ev("tee.snp.snpAsids", fmtRange(s.SNPASIDs)), check.Ev("tee.snp.sevAsids", fmtRange(s.SEVASIDs))}
			switch r := s.SNPASIDs; {
			case r != nil && r.Max > 0 && r.Max >= r.Min:
				return check.Ok(fmt.Sprintf("%d SNP ASIDs", r.Max-r.Min+1), ev...)
			case r != nil:
				return check.Failed("no ASIDs for SEV-ES/SNP guests", snpASIDRemedy, ev...)
			case s.SEVASIDs != nil && s.SEVASIDs.Min <= 1:
				// Plain SEV starts at the BIOS's minimum SEV non-ES ASID;
				// the ASIDs below it are the SEV-ES/SNP ones.
				return check.Failed(fmt.Sprintf("the BIOS gives every ASID to plain SEV (ASIDs %d - %d): none are left for SEV-ES/SNP, so kvm_amd turns sev_es and sev_snp off", s.SEVASIDs.Min, s.SEVASIDs.Max), snpASIDRemedy, ev...)
			case s.SEVASIDs != nil:
				return check.Ok(fmt.Sprintf("%d ASIDs below plain SEV's (from %d) for SEV-ES/SNP", s.SEVASIDs.Min-1, s.SEVASIDs.Min), ev...)
			}
			return check.Unsure("the boot log does not report the SEV/SEV-SNP ASID split", ev...)
		},
	}, {
		ID:        "snp.kvm.params",
		Title:     "if kvm_amd enables sev, sev_es and sev_snp",
		Why:       "KVM only launches SNP guests when kvm_amd was loaded with sev, sev_es and sev_snp on. kvm_amd turns sev_es and sev_snp off by itself when the BIOS left no SEV-ES/SNP ASIDs, the firmware is too old or the RMP or IOMMU SNP support is missing, so those checks come first.",
		Parent:    "snp.asids",
		Reads:     []string{"tee.snp.kvmSev", "tee.snp.kvmSevEs", "tee.snp.kvmSevSnp"},
		Platforms: "snp platforms",
		Remedies:  []string{"add kvm_amd.sev=1 kvm_amd.sev_es=1 kvm_amd.sev_snp=1 to the kernel command line (or options kvm_amd sev_snp=1 in /etc/modprobe.d/) and reboot"},
		Applies:   snp,
		Run: func(f *facts.Facts) check.Result {
			s := f.TEE.SNP
			ev := []check.Evidence{check.Ev("tee.snp.kvmSev", s.KVMSEV), check.Ev("tee.snp.kvmSevEs", s.KVMSEVES), check.Ev("tee.snp.kvmSevSnp", s.KVMSEVSNP)}
			var off []string
			for _, x := range []struct {
				name string
				v    *bool
			}{{"sev", s.KVMSEV}, {"sev_es", s.KVMSEVES}, {"sev_snp", s.KVMSEVSNP}} {
				if x.v == nil {
					return check.Unsure("kvm_amd parameter "+x.name+" not reported (is kvm_amd loaded?)", ev...)
				}
				if !*x.v {
					off = append(off, "kvm_amd."+x.name)
				}
			}
			if len(off) > 0 {
				return check.Failed(strings.Join(off, ", ")+" off", "add "+strings.Join(off, "=1 ")+"=1 to the kernel command line and reboot; kvm_amd turns them off by itself when the firmware, RMP, IOMMU or ASID checks above fail, so fix those first", ev...)
			}
			return check.Ok("sev, sev_es and sev_snp on", ev...)
		},
	}, {
		ID:        "snp.device",
		Title:     "if device /dev/sev exists",
		Why:       "The PSP device /dev/sev (ccp driver) is how the host talks to the SEV firmware; QEMU and attestation tooling open it.",
		Parent:    "snp.bios.enabled",
		Reads:     []string{"devices.nodes.dev/sev"},
		Platforms: "snp platforms",
		Remedies:  []string{"modprobe ccp; make sure CONFIG_CRYPTO_DEV_SP_PSP is set and the IOMMU is on"},
		Applies:   snp,
		Run: func(f *facts.Facts) check.Result {
			_, ok := node(f, "dev/sev")
			ev := check.Ev("devices.nodes.dev/sev.exists", ok)
			if !ok {
				return check.Failed("/dev/sev is missing", "modprobe ccp; check the boot log for ccp/psp errors", ev)
			}
			return check.Ok("/dev/sev present", ev)
		},
	}}
}

// kernelAtLeast checks an upstream minimum; an older kernel that already
// has the feature working is a vendor kernel: a warning, not a failure.
func kernelAtLeast(f *facts.Facts, rel string, major, minor int, what string, working bool) check.Result {
	ev := check.Ev("kernel.release", rel)
	v, ok := parseVersion(rel)
	switch {
	case !ok:
		return check.Unsure("kernel release not reported", ev)
	case v.atLeast(major, minor):
		return check.Ok(rel+" >= "+fmtVersion(major, minor), ev)
	case working:
		return check.Warned(fmt.Sprintf("%s predates upstream %s host support (%d.%d); %s works, so this is a vendor kernel", rel, what, major, minor, what),
			fmt.Sprintf("fine if your vendor supports it; upstream support needs >= %d.%d", major, minor), ev)
	}
	return check.Failed(fmt.Sprintf("kernel %s predates upstream %s host support (%d.%d)", rel, what, major, minor),
		fmt.Sprintf("install a kernel >= %d.%d (HWE/backports) or your vendor's %s host kernel", major, minor, what), ev)
}

func fmtRange(r *facts.Range) string {
	if r == nil {
		return "not reported"
	}
	return fmt.Sprintf("%d-%d", r.Min, r.Max)
}

// iommuOffFlags returns the IOMMU parameters that turn the IOMMU off.
func iommuOffFlags(flags []string) []string {
	var out []string
	for _, p := range flags {
		switch strings.ReplaceAll(p, "-", "_") {
		case "amd_iommu=off", "intel_iommu=off", "iommu=off":
			out = append(out, p)
		}
	}
	return out
}

// iommuPassthroughFlags returns the IOMMU parameters that make the default
// DMA domain passthrough (identity).
func iommuPassthroughFlags(flags []string) []string {
	var out []string
	for _, p := range flags {
		switch strings.ReplaceAll(p, "-", "_") {
		case "iommu=pt", "iommu.passthrough=1", "iommu.passthrough=y", "iommu.passthrough=on":
			out = append(out, p)
		}
	}
	return out
}
