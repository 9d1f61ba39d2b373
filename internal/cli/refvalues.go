package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/manifest"
	"berth.dev/berth/internal/node/refvalues"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// refvaluesFlags are the options of berth refvalues.
type refvaluesFlags struct {
	platform, firmware, kernel, initrd, cmdline string
	vcpus, vcpuType, pageOrder                  string
	guestFeatures, policy                       string
	manifest, cache                             string
	from                                        []string
	// installed measures the live installation under prefix.
	installed bool
	prefix    string
	// factsFile and node give the node facts the SNP TCB comes from.
	factsFile string
	node      bool
	rtmr      rtmrFlags
	// initdata is the CoCo init-data document (--initdata).
	initdata string
	// kataConfig is the Kata configuration file the command line is
	// derived from (--kata-config) instead of the one berth renders.
	kataConfig string
}

// bootInputs are the measured components, from flags or from a manifest;
// want holds the manifest's digests to check the computed inputs against.
type bootInputs struct {
	firmware, kernel, initrd refvalues.Component
	cmdline                  *string
	// cmdlineSource says where cmdline came from (Inputs.CmdlineSource).
	cmdlineSource string
	want          map[string]manifest.Component
	// closeInstalled releases the installation the components were read
	// from (--installed), kept open while they are measured.
	closeInstalled func() error
	// recorded are the install record's digests of those files.
	recorded map[string]RecordedFile
}

func newRefvaluesCmd(g *Globals) *cobra.Command {
	var f refvaluesFlags
	cmd := &cobra.Command{
		Use:   "refvalues --platform P (--firmware F [--kernel K [--initrd I] [--cmdline C]] | --manifest M [--from DIR]...)",
		Short: "Compute attestation reference values (SNP launch digest, TDX MRTD) from boot components",
		Long: `refvalues computes what an attestation service must expect from a
confidential guest booted from the given components, without running it:

  SNP platforms: the launch digest (SHA-384) of a QEMU/KVM guest booted from an
  AmdSev OVMF image with measured direct boot, for each vCPU count in --vcpus,
  for the platform's product line (or each of Milan, Genoa, Turin when the
  platform does not pin one), plus the guest policy and the TCB fields the
  operator must set.

  TDX platforms: MRTD of the TDVF image and, with --kernel, RTMR0-2 of a QEMU
  direct boot (TD HOB for --memory, variable store, the ACPI tables --qemu
  builds, kernel Authenticode digest, command line and initrd). A firmware
  that enforces Secure Boot is refused: it would not boot the kernel.

With --manifest, the firmware, kernel, initrd and command line are those the
component manifest resolves for the platform (roles firmware, kernel, initrd;
the measured kernelCmdline). Their files are looked up in the --from
directories (named by sha256 digest first, then by install path base name or
component name) and in the download cache (<cache>/sha256/<digest>), and
their sha256 and size must match the manifest.

With --manifest and --installed, the kernel command line is the one the Kata
runtime passes to the platform's guests: derived from the Kata configuration
berth renders for the platform (or --kata-config FILE) as Kata 4.1's Go
runtime builds it (kernel_params plus what it adds for QEMU, the TEE, the root
filesystem, console, debug and the agent), not the manifest's kernelCmdline;
--cmdline overrides it. The output says where the command line came from.

With --installed, they are the files the live installation under --prefix
(on the host --root names) holds: each is checked against the install record
(type, size, sha256) before it is measured, and the manifest (--manifest, or
the one the record names, pinned to the record's digest) gives the roles and
the measured command line.

With --facts FILE (berth facts -o json) or --node (discover --root), the SNP
minimum TCB is the node's reported TCB, for the node's product line; without,
it stays null and "operator must confirm".

-o json prints the versioned schema berth.dev/refvalues/v1; -o rvps a
Trustee RVPS registration message (sample provenance); -o contrast the
ReferenceValues of a Contrast manifest.`,
		Example: `  berth refvalues --platform k3s-qemu-snp-genoa --firmware OVMF.amdsev.fd \
    --kernel vmlinuz --initrd initrd.img --cmdline "console=ttyS0" --vcpus 1-4 -o json
  berth refvalues --platform kata-qemu-tdx --firmware OVMF.fd --kernel vmlinuz \
    --cmdline "console=hvc0" --memory 2048 --qemu /usr/bin/qemu-system-x86_64
  berth refvalues --platform kata-qemu-snp --manifest kata.yaml --from ./downloads
  berth refvalues --platform kata-qemu-snp-genoa --installed --node -o contrast`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRefvalues(cmd, g, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.platform, "platform", "", "confidential platform (e.g. k3s-qemu-snp-genoa, kata-qemu-tdx); required")
	fl.StringVar(&f.firmware, "firmware", "", "firmware image: AmdSev OVMF for SNP, TDVF (IntelTdx OVMF) for TDX; required")
	fl.StringVar(&f.kernel, "kernel", "", "kernel for measured direct boot (SNP launch digest; TDX RTMR1)")
	fl.StringVar(&f.initrd, "initrd", "", "initrd for measured direct boot (needs --kernel)")
	fl.StringVar(&f.cmdline, "cmdline", "", "kernel command line (needs --kernel; measured with a trailing NUL)")
	fl.StringVar(&f.vcpus, "vcpus", "1-8", "vCPU count N, or a range A-B, to compute SNP launch digests for")
	fl.StringVar(&f.vcpuType, "vcpu-type", "", "QEMU CPU model (e.g. EPYC-Genoa) or CPUID signature (0x...) instead of the product line's")
	fl.StringVar(&f.guestFeatures, "guest-features", "0x1", "SNP guest features (SEV_FEATURES of the VMSA), hex")
	fl.StringVar(&f.policy, "policy", "0x30000", "SNP guest policy, hex")
	fl.StringVar(&f.pageOrder, "page-order", "single-pass", "TDX page order: single-pass (upstream KVM, QEMU >= 9) or two-pass (QEMU 8.x stacks)")
	addRTMRFlags(fl, &f.rtmr)
	fl.StringVar(&f.manifest, "manifest", "", "component manifest (PATH, PATH@sha256:<hex> or URL@sha256:<hex>) to take the boot components from, instead of --firmware/--kernel/--initrd/--cmdline")
	fl.StringArrayVar(&f.from, "from", nil, "directory holding the manifest's component files (repeatable; with --manifest)")
	fl.StringVar(&f.cache, "cache", manifest.DefaultCache, "download cache root searched as <cache>/sha256/<digest> (with --manifest; \"\" for none)")
	fl.BoolVar(&f.installed, "installed", false, "measure the boot components of the live installation under --prefix, verified against its install record")
	fl.StringVar(&f.prefix, "prefix", configure.DefaultPrefix, "installation prefix (with --installed; a path on the host named by --root)")
	fl.StringVar(&f.factsFile, "facts", "", "facts JSON (berth facts -o json) whose SNP TCB fills the minimum TCB")
	fl.BoolVar(&f.node, "node", false, "discover the host named by --root and fill the SNP minimum TCB from its TCB")
	fl.StringVar(&f.kataConfig, "kata-config", "", "Kata configuration file to derive the guest kernel command line from (with --manifest or --installed; default: the one berth renders for --platform)")
	fl.StringVar(&f.initdata, "initdata", "", "CoCo init-data document (TOML, or the cc_init_data annotation value): adds the expected SNP HOST_DATA / TDX MRCONFIGID")
	Positive(cmd, "memory")
	cmd.AddCommand(newRefvaluesExplainCmd(g))
	return cmd
}

func runRefvalues(cmd *cobra.Command, g *Globals, f *refvaluesFlags) error {
	format, err := g.Format(output.Table, output.JSON, output.YAML, formatRVPS, formatContrast)
	if err != nil {
		return err
	}
	if f.platform == "" {
		return UsageErr(fmt.Errorf("--platform is required (e.g. k3s-qemu-snp-genoa or kata-qemu-tdx)"))
	}
	p, err := platform.Parse(f.platform)
	if err != nil {
		return UsageErr(fmt.Errorf("--platform: %w", err))
	}
	if !p.Confidential() {
		return UsageErr(fmt.Errorf("platform %s has no TEE: reference values exist only for SNP and TDX platforms (e.g. %s-qemu-snp or %s-qemu-tdx)", p, p.Distribution(), p.Distribution()))
	}
	if !p.MeasuredLaunch() {
		return UsageErr(fmt.Errorf("platform %s uses %s: berth models the launch measurement of QEMU guests only", p, p.Hypervisor()))
	}
	changed := cmd.Flags().Changed
	var in bootInputs
	if f.installed {
		for _, name := range []string{"firmware", "kernel", "initrd", "from", "cache"} {
			if changed(name) {
				return UsageErr(fmt.Errorf("--%s and --installed exclude each other: the installation holds the boot components", name))
			}
		}
		if g.installedBoot == nil {
			// berth links no installer: berth-cluster measures it.
			if g.delegateTo == "" {
				return fmt.Errorf("--installed: this binary cannot read installations")
			}
			return g.runDelegate(cmd.Context(), g.delegateTo, "refvalues", g.args)
		}
		if in, err = installedInputs(g, f, p); err != nil {
			return err
		}
		defer in.closeInstalled()
		if err := useKataCmdline(g, f, changed, p, &in); err != nil {
			return UsageErr(err)
		}
	} else if changed("prefix") {
		return UsageErr(fmt.Errorf("--prefix applies with --installed only"))
	} else if f.manifest != "" {
		for _, name := range []string{"firmware", "kernel", "initrd"} {
			if changed(name) {
				return UsageErr(fmt.Errorf("--%s and --manifest exclude each other: the manifest names the boot components", name))
			}
		}
		if in, err = manifestInputs(g, f, p); err != nil {
			return UsageErr(err)
		}
		if err := useKataCmdline(g, f, changed, p, &in); err != nil {
			return UsageErr(err)
		}
	} else {
		if len(f.from) > 0 || (changed("cache") && f.kernel == "") {
			return UsageErr(fmt.Errorf("--from and --cache apply with --manifest only (--cache also holds TDX ACPI tables with --kernel)"))
		}
		if f.firmware == "" {
			return UsageErr(fmt.Errorf("--firmware is required (or --manifest)"))
		}
		if f.kataConfig != "" {
			return UsageErr(fmt.Errorf("--kata-config applies with --manifest or --installed: with --kernel, give the command line with --cmdline"))
		}
		in = flagInputs(f, changed)
	}
	var doc *refvalues.Document
	switch p.TEE() {
	case platform.SNP:
		if changed("page-order") {
			return UsageErr(fmt.Errorf("--page-order applies to TDX platforms only; %s is SNP", p))
		}
		req, err := snpRequest(f, in, p.ProductLine())
		if err != nil {
			return UsageErr(err)
		}
		if req.NodeTCB, req.NodeTCBUnknown, err = nodeTCB(cmd, g, f); err != nil {
			return err
		}
		if doc, err = refvalues.SNP(req); err != nil {
			return UsageErr(err)
		}
	case platform.TDX:
		for _, name := range []string{"vcpus", "vcpu-type", "guest-features", "policy", "facts", "node"} {
			if changed(name) {
				return UsageErr(fmt.Errorf("--%s applies to SNP platforms only; %s is TDX", name, p))
			}
		}
		if f.manifest != "" && !in.kernel.Given() {
			g.log.Info("the manifest's TDX kernel is not resolved: only MRTD is printed; give --firmware and --kernel for RTMR0-2")
		}
		rtmr, err := tdxRTMRRequest(cmd, g, f, in)
		if err != nil {
			return UsageErr(err)
		}
		order, err := refvalues.ParsePageOrder(f.pageOrder)
		if err != nil {
			return UsageErr(fmt.Errorf("--page-order: %w", err))
		}
		if doc, err = refvalues.TDX(refvalues.TDXRequest{Firmware: in.firmware, PageOrder: order, RTMR: rtmr}); err != nil {
			return UsageErr(err)
		}
	default:
		return UsageErr(fmt.Errorf("platform %s: no reference values for TEE %s", p, p.TEE()))
	}
	if err := in.check(doc); err != nil {
		return UsageErr(err)
	}
	if doc.Inputs.Cmdline != nil {
		doc.Inputs.CmdlineSource = in.cmdlineSource
	}
	if f.initdata != "" {
		if doc.InitData, err = initDataValues(f.initdata, doc.TEE); err != nil {
			return UsageErr(err)
		}
	}
	doc.Platform = p.String()
	switch format {
	case formatRVPS, formatContrast:
		return writeExport(g, format, doc)
	}
	return output.Render(g.stdout, format, doc, func(w io.Writer) error { return doc.WriteTable(w) })
}

// snpRequest turns the flags into an SNP request; the product line comes
// from the platform (AnyProductLine: one set per product line).
func snpRequest(f *refvaluesFlags, in bootInputs, line platform.ProductLine) (refvalues.SNPRequest, error) {
	var req refvalues.SNPRequest
	var err error
	req.Firmware, req.Kernel, req.Initrd, req.Cmdline = in.firmware, in.kernel, in.initrd, in.cmdline
	if !req.Kernel.Given() && (req.Initrd.Given() || req.Cmdline != nil) {
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
	req.ProductLine = refvalues.ProductLineOf(line)
	if f.vcpuType != "" {
		vt, err := refvalues.ParseVCPUType(f.vcpuType)
		if err != nil {
			return req, fmt.Errorf("--vcpu-type: %w", err)
		}
		req.VCPUType = &vt
	}
	return req, nil
}

// flagInputs takes the boot components from --firmware, --kernel, --initrd
// and --cmdline.
func flagInputs(f *refvaluesFlags, changed func(string) bool) bootInputs {
	in := bootInputs{firmware: refvalues.File(f.firmware)}
	if f.kernel != "" {
		in.kernel = refvalues.File(f.kernel)
	}
	if f.initrd != "" {
		in.initrd = refvalues.File(f.initrd)
	}
	if changed("cmdline") {
		c := f.cmdline
		in.cmdline, in.cmdlineSource = &c, "--cmdline"
	}
	return in
}

// manifestInputs resolves the measured boot of p from the manifest and finds
// each component's file locally, checking its digest. TDX needs only the
// firmware: the kernel and initrd are not looked up.
func manifestInputs(g *Globals, f *refvaluesFlags, p platform.Platform) (bootInputs, error) {
	// The manifest is input the user named: a bad reference, a missing
	// or malformed file, one that does not serve p are usage errors, as
	// in berth manifest resolve.
	ref, err := manifest.ParseRef(f.manifest)
	if err != nil {
		return bootInputs{}, UsageErr(fmt.Errorf("--manifest: %w", err))
	}
	m, err := manifest.LoadRef(ref)
	if err != nil {
		return bootInputs{}, UsageErr(err)
	}
	g.log.Info("manifest", "source", m.Source(), "name", m.Name, "version", m.Version, "digest", m.Digest())
	boot, err := m.Boot(p)
	if err != nil {
		return bootInputs{}, UsageErr(err)
	}
	store := manifest.Store{Dirs: f.from, Cache: f.cache}
	in := bootInputs{want: map[string]manifest.Component{}}
	find := func(role string, c manifest.Component) (refvalues.Component, error) {
		path, err := store.Find(c)
		if err != nil {
			return refvalues.Component{}, err
		}
		g.log.Info("component", "role", role, "name", c.Name, "path", path)
		in.want[role] = c
		return refvalues.File(path), nil
	}
	if in.firmware, err = find("firmware", boot.Firmware); err != nil {
		return in, err
	}
	if !p.TEE().MeasuresDirectBoot() {
		return in, nil
	}
	if in.kernel, err = find("kernel", boot.Kernel); err != nil {
		return in, err
	}
	if boot.Initrd != nil {
		if in.initrd, err = find("initrd", *boot.Initrd); err != nil {
			return in, err
		}
	}
	in.cmdline = &boot.Cmdline
	return in, nil
}

// check compares what refvalues actually read with the manifest's digests:
// Store.Find verified the files, but they could change before they were
// measured, and the values must describe the manifest's components.
func (in bootInputs) check(doc *refvalues.Document) error {
	read := map[string]*refvalues.Input{"firmware": &doc.Inputs.Firmware, "kernel": doc.Inputs.Kernel, "initrd": doc.Inputs.Initrd}
	for role, rf := range in.recorded {
		got := read[role]
		if got == nil {
			return fmt.Errorf("installed %s %s was not measured", role, rf.Path)
		}
		if got.SHA256 != rf.SHA256 || got.Size != rf.Size {
			return fmt.Errorf("installed %s %s changed while it was measured: sha256 %s (%d bytes), the install record says %s (%d bytes)", role, got.Name, got.SHA256, got.Size, rf.SHA256, rf.Size)
		}
	}
	for role, c := range in.want {
		got := read[role]
		if got == nil {
			return fmt.Errorf("%s %s from the manifest was not measured", role, c.Name)
		}
		if got.SHA256 != c.SHA256 || got.Size != c.Size {
			return fmt.Errorf("component %s: %s changed while it was measured: sha256 %s (%d bytes), expected %s (%d bytes)", c.Name, got.Name, got.SHA256, got.Size, c.SHA256, c.Size)
		}
	}
	return nil
}
