package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/output"
	"berth.dev/berth/internal/refvalues"
	"berth.dev/berth/platform"
)

// refvaluesFlags are the options of berth refvalues.
type refvaluesFlags struct {
	platform, firmware, kernel, initrd, cmdline string
	vcpus, vcpuType, pageOrder                  string
	guestFeatures, policy                       string
}

func newRefvaluesCmd(g *globals) *cobra.Command {
	var f refvaluesFlags
	cmd := &cobra.Command{
		Use:   "refvalues --platform P --firmware F [--kernel K [--initrd I] [--cmdline C]]",
		Short: "Compute attestation reference values (SNP launch digest, TDX MRTD) from boot components",
		Long: `refvalues computes what an attestation service must expect from a
confidential guest booted from the given components, without running it:

  SNP platforms: the launch digest (SHA-384) of a QEMU/KVM guest booted from an
  AmdSev OVMF image with measured direct boot, for each vCPU count in --vcpus,
  for the platform's product line (or each of Milan, Genoa, Turin when the
  platform does not pin one), plus the guest policy and the TCB fields the
  operator must set.

  TDX platforms: MRTD of the TDVF image (the kernel, initrd and command line go
  into RTMRs, which berth does not compute).

-o json prints the versioned schema berth.dev/refvalues/v1.`,
		Example: `  berth refvalues --platform k3s-qemu-snp-genoa --firmware OVMF.amdsev.fd \
    --kernel vmlinuz --initrd initrd.img --cmdline "console=ttyS0" --vcpus 1-4 -o json
  berth refvalues --platform kata-qemu-tdx --firmware OVMF.inteltdx.fd`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRefvalues(cmd, g, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.platform, "platform", "", "confidential platform (e.g. k3s-qemu-snp-genoa, kata-qemu-tdx); required")
	fl.StringVar(&f.firmware, "firmware", "", "firmware image: AmdSev OVMF for SNP, TDVF (IntelTdx OVMF) for TDX; required")
	fl.StringVar(&f.kernel, "kernel", "", "kernel for measured direct boot (SNP)")
	fl.StringVar(&f.initrd, "initrd", "", "initrd for measured direct boot (SNP; needs --kernel)")
	fl.StringVar(&f.cmdline, "cmdline", "", "kernel command line (SNP; needs --kernel; measured with a trailing NUL)")
	fl.StringVar(&f.vcpus, "vcpus", "1-8", "vCPU count N, or a range A-B, to compute SNP launch digests for")
	fl.StringVar(&f.vcpuType, "vcpu-type", "", "QEMU CPU model (e.g. EPYC-Genoa) or CPUID signature (0x...) instead of the product line's")
	fl.StringVar(&f.guestFeatures, "guest-features", "0x1", "SNP guest features (SEV_FEATURES of the VMSA), hex")
	fl.StringVar(&f.policy, "policy", "0x30000", "SNP guest policy, hex")
	fl.StringVar(&f.pageOrder, "page-order", "single-pass", "TDX page order: single-pass (upstream KVM, QEMU >= 9) or two-pass (QEMU 8.x stacks)")
	return cmd
}

func runRefvalues(cmd *cobra.Command, g *globals, f *refvaluesFlags) error {
	format, err := g.format()
	if err != nil {
		return err
	}
	if f.platform == "" {
		return usageErr(fmt.Errorf("--platform is required (e.g. k3s-qemu-snp-genoa or kata-qemu-tdx)"))
	}
	p, err := platform.Parse(f.platform)
	if err != nil {
		return usageErr(fmt.Errorf("--platform: %w", err))
	}
	if !p.Confidential() {
		return usageErr(fmt.Errorf("platform %s has no TEE: reference values exist only for SNP and TDX platforms (e.g. %s-qemu-snp or %s-qemu-tdx)", p, p.Distribution(), p.Distribution()))
	}
	if p.Hypervisor() != platform.QEMU {
		return usageErr(fmt.Errorf("platform %s uses %s: berth models the launch measurement of QEMU guests only", p, p.Hypervisor()))
	}
	if f.firmware == "" {
		return usageErr(fmt.Errorf("--firmware is required"))
	}
	changed := cmd.Flags().Changed
	var doc *refvalues.Document
	switch p.TEE() {
	case platform.SNP:
		if changed("page-order") {
			return usageErr(fmt.Errorf("--page-order applies to TDX platforms only; %s is SNP", p))
		}
		req, err := snpRequest(f, changed, p.ProductLine())
		if err != nil {
			return usageErr(err)
		}
		if doc, err = refvalues.SNP(req); err != nil {
			return usageErr(err)
		}
	case platform.TDX:
		for _, name := range []string{"vcpus", "vcpu-type", "guest-features", "policy"} {
			if changed(name) {
				return usageErr(fmt.Errorf("--%s applies to SNP platforms only; %s is TDX", name, p))
			}
		}
		for _, name := range []string{"kernel", "initrd", "cmdline"} {
			if changed(name) {
				g.log.Warn("TDX measures the kernel, initrd and command line into RTMRs, which berth does not compute; only MRTD is printed", "flag", "--"+name)
			}
		}
		order, err := refvalues.ParsePageOrder(f.pageOrder)
		if err != nil {
			return usageErr(fmt.Errorf("--page-order: %w", err))
		}
		if doc, err = refvalues.TDX(refvalues.TDXRequest{Firmware: refvalues.File(f.firmware), PageOrder: order}); err != nil {
			return usageErr(err)
		}
	default:
		return usageErr(fmt.Errorf("platform %s: no reference values for TEE %s", p, p.TEE()))
	}
	doc.Platform = p.String()
	return output.Render(g.stdout, format, doc, func(w io.Writer) error { return doc.WriteTable(w) })
}

// snpRequest turns the flags into an SNP request; the product line comes
// from the platform (AnyProductLine: one set per product line).
func snpRequest(f *refvaluesFlags, changed func(string) bool, line platform.ProductLine) (refvalues.SNPRequest, error) {
	var req refvalues.SNPRequest
	var err error
	req.Firmware = refvalues.File(f.firmware)
	if f.kernel != "" {
		req.Kernel = refvalues.File(f.kernel)
	}
	if f.initrd != "" {
		req.Initrd = refvalues.File(f.initrd)
	}
	if changed("cmdline") {
		c := f.cmdline
		req.Cmdline = &c
	}
	if f.kernel == "" && (f.initrd != "" || req.Cmdline != nil) {
		return req, fmt.Errorf("--initrd and --cmdline need --kernel: without a kernel nothing is booted directly and nothing is measured")
	}
	if req.VCPUs, err = refvalues.ParseVCPURange(f.vcpus); err != nil {
		return req, fmt.Errorf("--vcpus: %w", err)
	}
	if req.GuestFeatures, err = refvalues.ParseHex(f.guestFeatures); err != nil {
		return req, fmt.Errorf("--guest-features: %w", err)
	}
	if req.GuestPolicy, err = refvalues.ParseHex(f.policy); err != nil {
		return req, fmt.Errorf("--policy: %w", err)
	}
	switch line {
	case platform.Milan:
		req.ProductLine = refvalues.Milan
	case platform.Genoa:
		req.ProductLine = refvalues.Genoa
	case platform.Turin:
		req.ProductLine = refvalues.Turin
	}
	if f.vcpuType != "" {
		vt, err := refvalues.ParseVCPUType(f.vcpuType)
		if err != nil {
			return req, fmt.Errorf("--vcpu-type: %w", err)
		}
		req.VCPUType = &vt
	}
	return req, nil
}
