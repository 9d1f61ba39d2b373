package catalog

import (
	"strings"

	"github.com/agnivade/levenshtein"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

// misspelled lists kernel parameters that look right but are read by no
// module to the parameter that was meant. The kernel treats '-' and '_' in
// module names alike, so keys are normalised to '_'.
func misspelled() [][2]string {
	return [][2]string{
		{"kvm.sev", "kvm_amd.sev"},
		{"kvm.sev_es", "kvm_amd.sev_es"},
		{"kvm.sev_snp", "kvm_amd.sev_snp"},
		{"kvm.snp", "kvm_amd.sev_snp"},
		{"kvm_amd.snp", "kvm_amd.sev_snp"},
		{"kvm_amd.sev_snp_enabled", "kvm_amd.sev_snp"},
		{"kvm.tdx", "kvm_intel.tdx"},
		{"kvm_amd.tdx", "kvm_intel.tdx"},
		{"kvm_intel.sev", "kvm_amd.sev"},
		{"kvm_intel.sev_snp", "kvm_amd.sev_snp"},
		{"kvm.nested", "kvm_intel.nested or kvm_amd.nested"},
		{"kvm_intel.sgx_enabled", "kvm_intel.sgx"},
		{"amd_iommu.on", "amd_iommu=on"},
		{"intel_iommu.on", "intel_iommu=on"},
	}
}

// cmdlineTypos returns "given -> meant" for every misspelled parameter.
func cmdlineTypos(cmdline string) []string {
	var out []string
	for _, tok := range strings.Fields(cmdline) {
		key, _, _ := strings.Cut(tok, "=")
		if mod, param, ok := strings.Cut(key, "."); ok {
			key = strings.ReplaceAll(mod, "-", "_") + "." + param
		}
		matched := false
		for _, m := range misspelled() {
			if key == m[0] {
				out = append(out, tok+" (did you mean "+m[1]+"?)")
				matched = true
			}
		}
		if mod, param, ok := strings.Cut(key, "."); ok && !matched {
			if want := nearModule(mod); want != "" {
				out = append(out, tok+" (did you mean "+want+"."+param+"?)")
			}
		}
	}
	return out
}

// nearModule returns the KVM/VFIO module a misspelled module name was
// meant to be ("kvm_inte" for kvm_intel), or "" when mod is right or not
// close to one: the kernel keeps parameters of unknown modules silently,
// so such a typo switches nothing on.
func nearModule(mod string) string {
	for _, want := range []string{"kvm_intel", "kvm_amd", "vfio_pci", "vfio_iommu_type1"} {
		if mod != want && len(mod) >= 5 && levenshtein.ComputeDistance(mod, want) == 1 {
			return want
		}
	}
	return ""
}

func cmdlineChecks() []check.Check {
	return nodeArea([]check.Check{{
		ID:        "cmdline.params",
		Title:     "for misspelled kernel parameters",
		Why:       "A module parameter given to the wrong module (kvm.sev_es=1 instead of kvm_amd.sev_es=1) is silently ignored, so a feature stays off although the command line seems to enable it.",
		Reads:     []string{"kernel.cmdline"},
		Platforms: "all (warning)",
		Remedies:  []string{"fix the parameter in GRUB_CMDLINE_LINUX (/etc/default/grub), run update-grub (or grubby) and reboot"},
		Applies:   check.Always(check.Warning),
		Run: func(f *facts.Facts) check.Result {
			typos := cmdlineTypos(f.Kernel.Cmdline)
			ev := []check.Evidence{check.Ev("kernel.cmdline", f.Kernel.Cmdline)}
			if len(typos) > 0 {
				return check.Warned("kernel parameters no module reads: "+strings.Join(typos, ", "),
					"fix them in GRUB_CMDLINE_LINUX (/etc/default/grub), run update-grub and reboot", ev...)
			}
			return check.Ok("no misspelled module parameters", ev...)
		},
	}})
}
