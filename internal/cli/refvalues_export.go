package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"

	"berth.dev/berth/internal/node/refvalues"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// The export formats of berth refvalues, beside table, json and yaml.
const (
	// formatRVPS is Trustee's RVPS registration message.
	formatRVPS output.Format = "rvps"
	// formatContrast is the ReferenceValues of a Contrast manifest.
	formatContrast output.Format = "contrast"
)

// writeExport writes doc in a verifier's own format. What that format
// cannot say (values berth does not know, product lines it does not
// accept) is logged as a warning, so that the JSON on stdout stays
// exactly the verifier's.
func writeExport(g *Globals, format output.Format, doc *refvalues.Document) error {
	var v any
	var notes []string
	var err error
	switch format {
	case formatRVPS:
		v, _, notes, err = doc.RVPS()
	case formatContrast:
		v, notes, err = doc.Contrast()
	}
	for _, n := range notes {
		g.log.Warn("-o "+string(format)+": "+n, "platform", doc.Platform)
	}
	if err != nil {
		return UsageErr(fmt.Errorf("-o %s: %w", format, err))
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding -o %s: %w", format, err)
	}
	_, err = g.stdout.Write(append(b, '\n'))
	return err
}

// InstalledBoot is what refvalues --installed measures: the boot
// components of one platform taken from the live installation, each file
// already checked against the install record, and the record's digests to
// check what was read against.
type InstalledBoot struct {
	Firmware, Kernel, Initrd refvalues.Component
	// Cmdline is the manifest's kernel command line (nil without a
	// measured direct boot).
	Cmdline *string
	// Recorded are the record's digests of the files taken, by role
	// (firmware, kernel, initrd).
	Recorded map[string]RecordedFile
	// Close releases the installation once the files are measured.
	Close func() error
}

// RecordedFile is an install record's digest of one file.
type RecordedFile struct {
	Path   string
	SHA256 string
	Size   int64
}

// InstalledBootFunc opens the installation under prefix on the host root
// and takes p's boot components from it; manifest, when given, is the
// manifest it was installed from (else the record names it). It lives in
// berth-cluster (installcmd), which links the installer; berth runs
// berth-cluster for refvalues --installed.
type InstalledBootFunc func(g *Globals, prefix, manifest string, p platform.Platform) (*InstalledBoot, error)

// installedInputs takes the boot components of p from the live
// installation under --prefix (Wiring.InstalledBoot).
func installedInputs(g *Globals, f *refvaluesFlags, p platform.Platform) (bootInputs, error) {
	ib, err := g.installedBoot(g, f.prefix, f.manifest, p)
	if err != nil {
		return bootInputs{}, err
	}
	return bootInputs{firmware: ib.Firmware, kernel: ib.Kernel, initrd: ib.Initrd, cmdline: ib.Cmdline,
		recorded: ib.Recorded, closeInstalled: ib.Close}, nil
}

// maxFactsFile bounds a --facts file: facts documents are tens of KiB.
const maxFactsFile = 16 << 20

// nodeTCB takes the node's SNP TCB from --facts or --node (discovery of
// --root). The reported TCB is used: it is what every attestation report of
// the node's guests carries (REPORTED_TCB) and what their VCEK is derived
// from, so a minimum set to it admits this node and nothing older; the
// kernel does not expose the committed TCB. Without either flag, or when
// the facts lack the TCB, the second result says why.
func nodeTCB(cmd *cobra.Command, g *Globals, f *refvaluesFlags) (*refvalues.NodeTCB, string, error) {
	var fs *facts.Facts
	var from string
	switch {
	case f.factsFile != "" && f.node:
		return nil, "", UsageErr(fmt.Errorf("--facts and --node exclude each other"))
	case f.factsFile != "":
		b, err := readLimited(f.factsFile, maxFactsFile)
		if err != nil {
			return nil, "", UsageErr(fmt.Errorf("--facts: %w", err))
		}
		fs = &facts.Facts{}
		if err := json.Unmarshal(b, fs); err != nil {
			return nil, "", UsageErr(fmt.Errorf("--facts %s: not a berth facts document (berth facts -o json): %w", f.factsFile, err))
		}
		if fs.SchemaVersion != facts.SchemaVersion {
			return nil, "", UsageErr(fmt.Errorf("--facts %s: schemaVersion %d, expected %d", f.factsFile, fs.SchemaVersion, facts.SchemaVersion))
		}
		from = "facts " + f.factsFile
	case f.node:
		root, cleanup, err := g.OpenRoot()
		defer cleanup()
		if err != nil {
			return nil, "", err
		}
		fs = discover.Run(cmd.Context(), root, g.DiscoverOptions(false))
		from = "node " + root.Path()
	default:
		return nil, "no node facts given (--facts FILE or --node)", nil
	}
	t := fs.TEE.SNP.TCB
	if t == nil {
		why := "the facts do not say"
		if r, ok := fs.UnknownReason("tee.snp.tcb"); ok {
			why = r
		}
		return nil, fmt.Sprintf("%s has no SNP TCB: %s", from, why), nil
	}
	raw, err := refvalues.ParseHex(t.Reported)
	if err != nil {
		return nil, "", UsageErr(fmt.Errorf("%s: tee.snp.tcb.reported: %w", from, err))
	}
	line, err := platform.ParseProductLine(fs.CPU.ProductLine)
	if err != nil || fs.CPU.ProductLine == "" {
		return nil, fmt.Sprintf("%s: CPU product line %q is not one berth knows the TCB layout of (Milan, Genoa, Turin)", from, fs.CPU.ProductLine), nil
	}
	return &refvalues.NodeTCB{Raw: raw, Kind: "reported", ProductLine: refvalues.ProductLineOf(line), Source: from + ": " + t.Source}, "", nil
}

// readLimited reads a whole regular file, refusing more than limit bytes
// (and a FIFO or device unopened).
func readLimited(name string, limit int64) ([]byte, error) {
	fl, err := hostfs.OpenRegular(name, limit)
	if err != nil {
		return nil, err
	}
	defer fl.Close()
	b, err := io.ReadAll(io.LimitReader(fl, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	return b, nil
}
