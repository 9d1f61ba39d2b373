package cli

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"berth.dev/berth/internal/node/refvalues"
)

const rvLogs = rvData + "eventlogs/"

// TestRefvaluesExplain runs berth refvalues explain on real TDX guest logs
// (testdata/eventlogs/SOURCES.md): one against itself, against another
// guest's log, and against a refvalues document naming berth's events.
func TestRefvaluesExplain(t *testing.T) {
	dir := t.TempDir()
	// A refvalues document whose RTMR0-2 are the padded log's own (the
	// values go-eventlog states), with RTMR2's second event changed to
	// what berth would call the initrd: explain must name it.
	good := "3fa2f61f395b7f5feefb4ec2df61297f109ad8abcd6410c1b7df60f21f37b19297fc35e544039c7e1edece752afd17f6"
	ref := writeExplainRef(t, dir)
	dstackQuote, dstackLog := writeDstackSample(t, dir)
	notBerth := filepath.Join(dir, "rvps.json")
	if err := os.WriteFile(notBerth, []byte(`{"version":"0.1.0","type":"sample","payload":"e30="}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []cliCase{
		{name: "log against itself", args: []string{"--log", rvLogs + "cos-113-intel-tdx.bin", "--table", rvLogs + "cos-113-intel-tdx.table.bin", "--reference-log", rvLogs + "cos-113-intel-tdx.bin"},
			wantOut: []string{"RTMR0  match", "RTMR2  match", good}},
		{name: "another guest's log", args: []string{"--log", rvLogs + "cos-113-intel-tdx.bin", "--reference-log", rvLogs + "cos-113-intel-tdx-dupe-separator-unpadded.bin"},
			wantCode: ExitNotReady, wantOut: []string{"RTMR0  DIFFERS", "first difference: event 1 of RTMR0 (log record 2 at offset 0xad)", "EV_EFI_PLATFORM_FIRMWARE_BLOB2", "another firmware build", "RTMR2  match"}},
		{name: "berth reference names the initrd", args: []string{"--log", rvLogs + "cos-113-intel-tdx.bin", "--reference", ref},
			wantCode: ExitNotReady, wantOut: []string{"RTMR0  match", "RTMR1  match", "RTMR2  DIFFERS", "first difference: event 1 of RTMR2", "initrd", "likely cause: another initrd"}},
		{name: "json", args: []string{"--log", rvLogs + "cos-113-intel-tdx.bin", "--reference", ref, "-o", "json"},
			wantCode: ExitNotReady, wantOut: []string{`"register": "RTMR2"`, `"expectedEvent": "initrd"`, `"likelyCause": "another initrd`}},
		{name: "dstack log against its own quote", args: []string{"--log", dstackLog, "--reference-log", dstackLog, "--quote", dstackQuote},
			wantOut: []string{"RTMR1  match", "(the log replays to it)"}},
		{name: "another TD's log against the quote", args: []string{"--log", rvLogs + "cos-113-intel-tdx.bin", "--reference-log", dstackLog, "--quote", dstackQuote},
			wantCode: ExitNotReady, wantOut: []string{"THE LOG DOES NOT REPLAY TO IT"}, wantErr: "is not that TD's log"},
		{name: "not a quote", args: []string{"--log", dstackLog, "--reference-log", dstackLog, "--quote", rvLogs + "CCEL.bin"}, wantCode: ExitUsage, wantErr: "TDX quote: offset 0x4: tee_type"},
		{name: "no log", args: []string{"--reference", ref}, wantCode: ExitUsage, wantErr: "--log is required"},
		{name: "both references", args: []string{"--log", rvLogs + "CCEL.bin", "--reference", ref, "--reference-log", ref}, wantCode: ExitUsage, wantErr: "give one of --reference"},
		{name: "table is not a log", args: []string{"--log", rvLogs + "CCEL.bin", "--reference", ref}, wantCode: ExitUsage, wantErr: "offset 0x4: header eventType"},
		{name: "log is not a table", args: []string{"--log", rvLogs + "cos-113-intel-tdx.bin", "--table", rvLogs + "cos-113-intel-tdx.bin", "--reference", ref}, wantCode: ExitUsage, wantErr: "larger than"},
		{name: "log larger than the table's area", args: []string{"--log", rvLogs + "cos-113-intel-tdx.bin", "--table", writeSmallCCEL(t, dir), "--reference", ref}, wantCode: ExitUsage, wantErr: "more than the 16-byte log area"},
		{name: "rvps export refused", args: []string{"--log", rvLogs + "cos-113-intel-tdx.bin", "--reference", notBerth}, wantCode: ExitUsage, wantErr: "without the events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runCLICase(t, append([]string{"refvalues", "explain"}, tt.args...), tt) })
	}
}

// writeExplainRef writes a refvalues document with the padded log's events
// under berth-like names, its RTMR2 event 1 replaced by an "initrd" event
// of another digest, and the registers replayed from those events.
func writeExplainRef(t *testing.T, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(rvLogs + "cos-113-intel-tdx.bin")
	if err != nil {
		t.Fatal(err)
	}
	log, err := refvalues.ParseEventLog(raw)
	if err != nil {
		t.Fatal(err)
	}
	rv := refvalues.LogRTMRs(log)
	n := 0
	for i, e := range rv.Events {
		if e.RTMR == 2 {
			if n == 1 {
				rv.Events[i] = refvalues.TDXEvent{RTMR: 2, Event: "initrd", Digest: refvalues.Digest384(sha512.Sum384([]byte("another initrd")))}
			}
			n++
		}
	}
	rv.RTMR = [3]refvalues.Digest384{}
	for _, e := range rv.Events {
		h := sha512.New384()
		h.Write(rv.RTMR[e.RTMR][:])
		h.Write(e.Digest[:])
		h.Sum(rv.RTMR[e.RTMR][:0])
	}
	b, err := json.Marshal(refvalues.Document{SchemaVersion: refvalues.SchemaVersion, TDX: &refvalues.TDXValues{RTMR: rv}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "expected.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeSmallCCEL writes a valid CCEL table whose log area is 16 bytes.
func writeSmallCCEL(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(rvLogs + "CCEL.bin")
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Clone(b)
	clear(b[40:48])
	b[40] = 16
	var sum byte
	for _, c := range b {
		sum += c
	}
	b[9] -= sum // the bytes must still sum to 0
	p := filepath.Join(dir, "small-ccel.bin")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeDstackSample writes the quote (binary) and event log (JSON) of
// dstack's verifier fixture, the way a guest hands them over.
func writeDstackSample(t *testing.T, dir string) (quote, log string) {
	t.Helper()
	b, err := os.ReadFile(rvLogs + "dstack-quote-report.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Quote    string `json:"quote"`
		EventLog string `json:"event_log"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	q, err := hex.DecodeString(f.Quote)
	if err != nil {
		t.Fatal(err)
	}
	quote, log = filepath.Join(dir, "quote.bin"), filepath.Join(dir, "eventlog.json")
	if err := os.WriteFile(quote, q, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(log, []byte(f.EventLog), 0o644); err != nil {
		t.Fatal(err)
	}
	return quote, log
}
