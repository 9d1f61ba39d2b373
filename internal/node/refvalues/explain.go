package refvalues

import (
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// Explanation compares a guest's event log with the events berth expects,
// register by register.
type Explanation struct {
	// Registers are RTMR0-2 (the registers the firmware extends at boot).
	Registers []RegisterExplanation `json:"registers"`
	// Events is the number of records in the log, header included.
	Events int `json:"events"`
	// Quote is the TDX quote the log was checked against, if any.
	Quote *TDXQuote `json:"quote,omitempty"`
}

// RegisterExplanation is one RTMR: the value the log replays to, the
// expected value and, when they differ, the first differing event.
type RegisterExplanation struct {
	Register string    `json:"register"`
	Log      Digest384 `json:"log"`
	Expected Digest384 `json:"expected"`
	Match    bool      `json:"match"`
	// LogEvents and ExpectedEvents count the events extending it.
	LogEvents      int        `json:"logEvents"`
	ExpectedEvents int        `json:"expectedEvents"`
	First          *EventDiff `json:"firstDifference,omitempty"`
	// Quote is the register in the quote (CheckQuote); QuoteMatch says
	// whether the log replays to it.
	Quote      *Digest384 `json:"quote,omitempty"`
	QuoteMatch bool       `json:"quoteMatch,omitempty"`
}

// EventDiff is the first event of a register where the log and the
// expectation part.
type EventDiff struct {
	// Position is the event's position among the register's events (0-based).
	Position int `json:"position"`
	// Seq and Offset locate the log's event; -1 when the log has no event there.
	Seq    int    `json:"seq"`
	Offset int    `json:"offset"`
	Log    string `json:"log,omitempty"`
	// LogEvent says what the guest measured there.
	LogEvent string `json:"logEvent,omitempty"`
	Expected string `json:"expected,omitempty"`
	// ExpectedEvent is berth's name for what it expects there.
	ExpectedEvent string `json:"expectedEvent,omitempty"`
	Cause         string `json:"likelyCause"`
}

// Any reports whether some register differs.
func (x *Explanation) Any() bool {
	for _, r := range x.Registers {
		if !r.Match {
			return true
		}
	}
	return false
}

// Explain replays log and compares RTMR0-2 event by event with want (the
// events of a berth refvalues document).
func Explain(log *EventLog, want *RTMRValues) *Explanation {
	x := &Explanation{Events: len(log.Events) + 1}
	got := log.Replay()
	for r := range 3 {
		var logEvs []LogEvent
		for _, e := range log.Events {
			if e.RTMR() == r {
				logEvs = append(logEvs, e)
			}
		}
		var wantEvs []TDXEvent
		for _, e := range want.Events {
			if e.RTMR == r {
				wantEvs = append(wantEvs, e)
			}
		}
		re := RegisterExplanation{
			Register: fmt.Sprintf("RTMR%d", r), Log: got[r], Expected: want.RTMR[r],
			Match: got[r] == want.RTMR[r], LogEvents: len(logEvs), ExpectedEvents: len(wantEvs),
		}
		if !re.Match {
			re.First = firstDiff(logEvs, wantEvs)
		}
		x.Registers = append(x.Registers, re)
	}
	return x
}

func firstDiff(logEvs []LogEvent, wantEvs []TDXEvent) *EventDiff {
	for i := 0; i < max(len(logEvs), len(wantEvs)); i++ {
		d := &EventDiff{Position: i, Seq: -1, Offset: -1}
		if i < len(logEvs) {
			e := logEvs[i]
			d.Seq, d.Offset, d.Log, d.LogEvent = e.Seq, e.Offset, e.SHA384.String(), e.Describe()
		}
		if i < len(wantEvs) {
			d.Expected, d.ExpectedEvent = wantEvs[i].Digest.String(), wantEvs[i].Event
		}
		if d.Log == d.Expected {
			continue
		}
		switch {
		case i >= len(wantEvs):
			d.Cause = "the guest measured more than berth expects: a newer edk2 (202508+ measures more fw_cfg items and SMBIOS), a boot loader, or the guest OS extended this register"
		case i >= len(logEvs):
			d.Cause = "the guest measured fewer events than berth expects: " + likelyCause(d.ExpectedEvent)
		default:
			d.Cause = likelyCause(d.ExpectedEvent)
		}
		return d
	}
	// Equal events but different values cannot happen: the registers are
	// replays of the same digests. Kept for a truncated expectation.
	return nil
}

// likelyCause names what makes an event differ, by berth's name for it.
func likelyCause(event string) string {
	switch {
	case event == "TD HOB":
		return "another guest memory size (--memory, Kata's default_memory) or firmware: the TD HOB is the TD's memory map"
	case event == "Configuration FV":
		return "another firmware build: the configuration volume (variable store) differs"
	case event == "SecureBoot" || event == "PK" || event == "KEK" || event == "db" || event == "dbx":
		return "another Secure Boot configuration: the firmware enrolls keys or ships another variable store"
	case strings.HasPrefix(event, "QEMU FW CFG "):
		return "other QEMU fw_cfg items (a boot menu, bootindex devices, memory hotplug, extra PCI roots) or an edk2 before 2025.05, which measures none (--edk2)"
	case event == "SMBIOS tables":
		return "another QEMU version or machine type (QEMU's SMBIOS names them), -smbios options, or another firmware build (OVMF's BIOS information names its vendor, version and date), or an edk2 before 2025.05, which measures none (--edk2)"
	case event == tableLoaderFile || strings.HasPrefix(event, "etc/"):
		return "another QEMU version or machine arguments (memory, vCPUs, devices): QEMU builds the ACPI tables"
	case event == "BootOrder" || strings.HasPrefix(event, "Boot0"):
		return "other boot variables: another firmware build or edk2 release (2025.05 added the \"EFI Firmware Setup\" option), or a boot disk that adds a boot option"
	case event == "separator" || event == evCallingEFIApp || event == evExitBSInvoke || event == evExitBSSuccess:
		return "another edk2 release orders these events differently (--edk2)"
	case strings.HasPrefix(event, "kernel (Authenticode)"):
		return "another kernel, or another QEMU version (before 10 QEMU patches the kernel's setup header, with the initrd address and memory size)"
	case event == "kernel command line":
		return "another kernel command line (the Kata runtime adds parameters of its own), or another edk2 (202508+ places initrd= differently)"
	case event == "initrd":
		return "another initrd, or none loaded"
	}
	// A reference taken from another guest's log names events by their
	// TCG type and data.
	for _, c := range []struct{ prefix, cause string }{
		{"EV_EFI_PLATFORM_FIRMWARE_BLOB", "another firmware build or configuration volume"},
		{"EV_EFI_HANDOFF_TABLES", "other hand-off tables: another guest memory size (TD HOB) or QEMU's ACPI tables"},
		{"EV_PLATFORM_CONFIG_FLAGS", "another QEMU version or machine arguments: QEMU's fw_cfg items (ACPI tables, loader) differ"},
		{"EV_EFI_VARIABLE_DRIVER_CONFIG", "another Secure Boot configuration (enrolled keys)"},
		{"EV_EFI_VARIABLE", "other UEFI variables: another firmware build or boot configuration"},
		{"EV_SEPARATOR", "the events are in another order: another edk2 release or boot path"},
		{"EV_EFI_GPT_EVENT", "another boot disk (GPT partition table)"},
		{"EV_EFI_BOOT_SERVICES_APPLICATION", "another kernel or boot loader binary"},
		{"EV_EFI_ACTION", "another boot path or edk2 release"},
		{"EV_IPL", "another boot loader configuration or kernel command line"},
		{"EV_EVENT_TAG", "another kernel command line or initrd"},
	} {
		if strings.HasPrefix(event, c.prefix) {
			return c.cause
		}
	}
	return "the event differs from the reference"
}

// LogRTMRs turns a (known-good) event log into an expectation for Explain:
// its replayed RTMR0-2 and its events, named by what they measured.
func LogRTMRs(log *EventLog) *RTMRValues {
	mr := log.Replay()
	v := &RTMRValues{}
	copy(v.RTMR[:], mr[:3])
	for _, e := range log.Events {
		if r := e.RTMR(); r >= 0 && r < 3 {
			v.Events = append(v.Events, TDXEvent{RTMR: r, Event: e.Describe(), Digest: e.SHA384})
		}
	}
	return v
}

// WriteTable prints the comparison for a terminal.
func (x *Explanation) WriteTable(w io.Writer) error {
	var b strings.Builder
	for _, r := range x.Registers {
		state := "match"
		if !r.Match {
			state = "DIFFERS"
		}
		fmt.Fprintf(&b, "%s  %s  (%d events in the log, %d expected)\n", r.Register, state, r.LogEvents, r.ExpectedEvents)
		fmt.Fprintf(&b, "  log       %s\n  expected  %s\n", r.Log, r.Expected)
		if r.Quote != nil {
			state := "the log replays to it"
			if !r.QuoteMatch {
				state = "THE LOG DOES NOT REPLAY TO IT: not this TD's log, or a changed one"
			}
			fmt.Fprintf(&b, "  quote     %s  (%s)\n", *r.Quote, state)
		}
		if d := r.First; d != nil {
			fmt.Fprintf(&b, "  first difference: event %d of %s", d.Position, r.Register)
			if d.Seq >= 0 {
				fmt.Fprintf(&b, " (log record %d at offset %#x)", d.Seq, d.Offset)
			}
			b.WriteString("\n")
			fmt.Fprintf(&b, "    log       %s  %s\n", orNone(d.Log), d.LogEvent)
			fmt.Fprintf(&b, "    expected  %s  %s\n", orNone(d.Expected), d.ExpectedEvent)
			fmt.Fprintf(&b, "    likely cause: %s\n", d.Cause)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// UnmarshalText reads the lowercase (or uppercase) hex MarshalText writes.
func (d *Digest384) UnmarshalText(b []byte) error {
	if len(b) != 2*len(d) {
		return fmt.Errorf("digest %q: %d hex digits, expected %d", b, len(b), 2*len(d))
	}
	if _, err := hex.Decode(d[:], b); err != nil {
		return fmt.Errorf("digest %q: %w", b, err)
	}
	return nil
}

// ReferenceRTMRs reads RTMR0-2 and their events from a berth refvalues
// document (-o json or -o yaml, schema SchemaVersion). RVPS and Contrast
// exports carry the register values only, without the events an
// explanation needs; they are refused with that reason.
func ReferenceRTMRs(name string, b []byte) (*RTMRValues, error) {
	var doc struct {
		SchemaVersion string `json:"schemaVersion"`
		TDX           *struct {
			RTMR *RTMRValues `json:"rtmr"`
		} `json:"tdx"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: not a berth refvalues document (-o json or -o yaml): %w", name, err)
	}
	if doc.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%s: schemaVersion %q, expected %q (berth refvalues -o json; RVPS and Contrast exports hold register values without the events to compare)", name, doc.SchemaVersion, SchemaVersion)
	}
	if doc.TDX == nil || doc.TDX.RTMR == nil {
		return nil, fmt.Errorf("%s: no tdx.rtmr: compute it with berth refvalues --platform <tdx platform> --kernel ... -o json", name)
	}
	for i, e := range doc.TDX.RTMR.Events {
		if e.RTMR < 0 || e.RTMR > 2 {
			return nil, fmt.Errorf("%s: tdx.rtmr.events[%d].rtmr: %d, expected 0-2", name, i, e.RTMR)
		}
	}
	if got := replay(doc.TDX.RTMR.Events); got != doc.TDX.RTMR.RTMR {
		return nil, fmt.Errorf("%s: tdx.rtmr.events do not replay to tdx.rtmr.rtmr: the document was edited", name)
	}
	return doc.TDX.RTMR, nil
}
