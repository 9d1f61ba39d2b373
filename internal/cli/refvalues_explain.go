package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"berth.dev/berth/internal/node/refvalues"
	"berth.dev/berth/internal/present/output"
)

// Bounds of explain's inputs: edk2 reserves 64 KiB to a few MiB for the CC
// event log; a refvalues document is a few KiB plus its event names.
const (
	maxEventLogFile  = 64 << 20
	maxCCELTableFile = 4 << 10
	maxReferenceFile = 16 << 20
	maxQuoteFile     = 64 << 10
)

// explainFlags are the options of berth refvalues explain.
type explainFlags struct {
	log, table, reference, referenceLog, quote string
	// snpReport is an SEV-SNP attestation report (--snp-report).
	snpReport string
}

// newRefvaluesExplainCmd is `berth refvalues explain`: a subcommand of
// refvalues because it compares a guest with what refvalues computes (its
// -o json document), and needs none of a node's facts.
func newRefvaluesExplainCmd(g *Globals) *cobra.Command {
	var f explainFlags
	cmd := &cobra.Command{
		Use:   "explain --log CCEL_DATA [--table CCEL] (--reference REFVALUES.json | --reference-log GOOD_LOG)",
		Short: "Replay a TDX guest's event log and name the first event per RTMR that differs from the reference values",
		Long: `explain replays a TDX guest's event log (the CC event log the guest exposes as
/sys/firmware/acpi/tables/data/CCEL, or any TCG2 crypto-agile log with SHA-384
digests) into RTMR0-2 and compares it event by event with what berth refvalues
computed for the platform (--reference: its -o json or -o yaml document, which
keeps the event list) or with a known-good guest's log (--reference-log).

For each register it prints both values and, when they differ, the first
differing event: its position among the register's events, the log record's
number and byte offset, both digests, what the guest measured (event type and
data: variable name, action string, table or file name) and what berth
expected (TD HOB, ACPI table, kernel, command line, initrd, separator...), with
the likely cause: another memory size or firmware, another QEMU version or
machine arguments, another kernel, command line or initrd, another edk2
release.

--quote checks that the log replays to the RTMR0-2 of the guest's TDX quote
(DCAP v4 or v5; the signature is a verifier's business): a log that does not
is not that TD's log and is refused (exit 1). --log also reads dstack's JSON
event log (a JSON array of {imr, event_type, digest, event, event_payload}).

--table checks the CCEL ACPI table (/sys/firmware/acpi/tables/CCEL): TDX CC
type and a log no longer than its log area. A malformed log or table is refused
with the byte offset and field.

--snp-report explains an SEV-SNP guest instead: its attestation report
(1184 bytes as /dev/sev-guest returns it, versions 2, 3 and 5, or the same in
hex) is compared with --reference (berth refvalues -o json for the SNP
platform, with --initdata when the pod has init-data): POLICY, MEASUREMENT
(which product line and vCPU count it matches), HOST_DATA (the init-data
digest) and REPORTED_TCB against the minimum TCB, naming the first field that
differs and its likely cause. The signature is not checked (a verifier's
business). A malformed report is refused with the byte offset and field.

Exit status: 0 when RTMR0-2 (or the SNP report's fields) match, 1 when one
differs, 2 on bad input.
RVPS and Contrast exports hold register values only and are not accepted as a
reference: give the -o json document they were exported from.`,
		Example: `  berth refvalues --platform kata-qemu-tdx --firmware OVMF.fd --kernel vmlinuz \
    --cmdline "console=hvc0" -o json > expected.json
  berth refvalues explain --log CCEL.data --table CCEL --reference expected.json
  berth refvalues explain --log bad-guest.CCEL --reference-log good-guest.CCEL -o json
  berth refvalues --platform kata-qemu-snp --installed --initdata initdata.toml -o json > snp.json
  berth refvalues explain --snp-report report.bin --reference snp.json`,
		Args: NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runExplain(g, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.log, "log", "", "the guest's event log (/sys/firmware/acpi/tables/data/CCEL, or a TCG2 crypto-agile log); required")
	fl.StringVar(&f.table, "table", "", "the guest's CCEL ACPI table (/sys/firmware/acpi/tables/CCEL), checked against the log")
	fl.StringVar(&f.reference, "reference", "", "berth refvalues -o json/yaml document with tdx.rtmr (the expected events)")
	fl.StringVar(&f.referenceLog, "reference-log", "", "a known-good guest's event log to compare with instead of --reference")
	fl.StringVar(&f.snpReport, "snp-report", "", "an SEV-SNP guest's attestation report (binary or hex) to compare with --reference instead of an event log")
	fl.StringVar(&f.quote, "quote", "", "the guest's TDX quote (DCAP v4/v5, binary): the log must replay to its RTMR0-2")
	return cmd
}

func runExplain(g *Globals, f *explainFlags) error {
	format, err := g.Format(output.Table, output.JSON, output.YAML)
	if err != nil {
		return err
	}
	if f.snpReport != "" {
		return runExplainSNP(g, f, format)
	}
	if f.log == "" {
		return UsageErr(fmt.Errorf("--log is required: the guest's event log (/sys/firmware/acpi/tables/data/CCEL)"))
	}
	if (f.reference == "") == (f.referenceLog == "") {
		return UsageErr(fmt.Errorf("give one of --reference (berth refvalues -o json) and --reference-log (a known-good guest's log)"))
	}
	log, err := readEventLog(f.log)
	if err != nil {
		return UsageErr(err)
	}
	if f.table != "" {
		b, err := readLimited(f.table, maxCCELTableFile)
		if err != nil {
			return UsageErr(err)
		}
		t, err := refvalues.ParseCCEL(b)
		if err != nil {
			return UsageErr(fmt.Errorf("%s: %w", f.table, err))
		}
		if uint64(log.Size) > t.LAML {
			return UsageErr(fmt.Errorf("%s: %d bytes of events, more than the %d-byte log area the CCEL table %s declares (LAML): not this guest's table", f.log, log.Size, t.LAML, f.table))
		}
	}
	var want *refvalues.RTMRValues
	if f.reference != "" {
		b, err := readLimited(f.reference, maxReferenceFile)
		if err != nil {
			return UsageErr(err)
		}
		if want, err = refvalues.ReferenceRTMRs(f.reference, b); err != nil {
			return UsageErr(err)
		}
	} else {
		good, err := readEventLog(f.referenceLog)
		if err != nil {
			return UsageErr(err)
		}
		want = refvalues.LogRTMRs(good)
	}
	x := refvalues.Explain(log, want)
	if f.quote != "" {
		b, err := readLimited(f.quote, maxQuoteFile)
		if err != nil {
			return UsageErr(err)
		}
		q, err := refvalues.ParseTDXQuote(b)
		if err != nil {
			return UsageErr(fmt.Errorf("%s: %w", f.quote, err))
		}
		x.CheckQuote(q)
	}
	if err := output.Render(g.stdout, format, x, func(w io.Writer) error { return x.WriteTable(w) }); err != nil {
		return err
	}
	if x.QuoteMismatch() {
		return ExitErr(ExitNotReady, fmt.Errorf("%s does not replay to the RTMRs of quote %s: it is not that TD's log, or it was changed; its events explain nothing", f.log, f.quote))
	}
	if x.Any() {
		// The table or document said which register and why.
		return ExitErr(ExitNotReady, errors.New(""))
	}
	return nil
}

func readEventLog(name string) (*refvalues.EventLog, error) {
	b, err := readLimited(name, maxEventLogFile)
	if err != nil {
		return nil, err
	}
	parse := refvalues.ParseEventLog
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		// dstack's guest agent returns the log as JSON.
		parse = refvalues.ParseDstackEventLog
	}
	log, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return log, nil
}

// maxSNPReportFile bounds --snp-report: 1184 bytes, or twice that in hex
// with line breaks.
const maxSNPReportFile = 8 << 10

// runExplainSNP compares an SNP attestation report with an SNP reference
// document.
func runExplainSNP(g *Globals, f *explainFlags, format output.Format) error {
	for name, v := range map[string]string{"log": f.log, "table": f.table, "reference-log": f.referenceLog, "quote": f.quote} {
		if v != "" {
			return UsageErr(fmt.Errorf("--%s and --snp-report exclude each other: an SNP report is compared with --reference only", name))
		}
	}
	if f.reference == "" {
		return UsageErr(fmt.Errorf("--snp-report needs --reference: berth refvalues -o json for the SNP platform"))
	}
	b, err := readLimited(f.snpReport, maxSNPReportFile)
	if err != nil {
		return UsageErr(err)
	}
	r, err := refvalues.DecodeSNPReport(b)
	if err != nil {
		return UsageErr(fmt.Errorf("%s: %w", f.snpReport, err))
	}
	rb, err := readLimited(f.reference, maxReferenceFile)
	if err != nil {
		return UsageErr(err)
	}
	ref, err := refvalues.ReferenceSNP(f.reference, rb)
	if err != nil {
		return UsageErr(err)
	}
	x := refvalues.ExplainSNP(r, ref)
	if err := output.Render(g.stdout, format, x, func(w io.Writer) error { return x.WriteTable(w) }); err != nil {
		return err
	}
	if x.Any() {
		return ExitErr(ExitNotReady, errors.New(""))
	}
	return nil
}
