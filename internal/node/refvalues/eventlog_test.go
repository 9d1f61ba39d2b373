package refvalues

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realLogs are TDX guests' CC event logs with the RTMR0-2 their source
// (google/go-eventlog's tests, see testdata/eventlogs/SOURCES.md) states.
var realLogs = []struct {
	file  string
	table string
	rtmr  [3]string
}{
	{
		file:  "cos-113-intel-tdx.bin",
		table: "cos-113-intel-tdx.table.bin",
		rtmr: [3]string{
			"3fa2f61f395b7f5feefb4ec2df61297f109ad8abcd6410c1b7df60f21f37b19297fc35e544039c7e1edece752afd17f6",
			"f62dbc072bd5d3f3438b7b35c39a727f5aea2ffc2473f43723953f530daf62504f0a7944aa62c41a86e8a878c2b122c1",
			"4969684dc87381fc3b3134176c8d8806eaf0a901859f5f70cfae8d17714b46c10a8de219048c9fc09f11f381a6fbe7c1",
		},
	},
	{
		file:  "cos-113-intel-tdx-dupe-separator-unpadded.bin",
		table: "CCEL.bin",
		rtmr: [3]string{
			"a4de2df23e9611299123ba4359c42a5e578b0f8488bf1bba8ef5606d9ea5d81c97c064b482a5eac537d166bd0f0f752d",
			"0ee9366c928a77092f55e9e114c7394181fd264699155f0df77d23577618d5f650568a17d379355a07bd846e552f4e20",
			"4969684dc87381fc3b3134176c8d8806eaf0a901859f5f70cfae8d17714b46c10a8de219048c9fc09f11f381a6fbe7c1",
		},
	},
}

func readLog(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "eventlogs", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEventLogReplaysRealLogs(t *testing.T) {
	for _, tc := range realLogs {
		t.Run(tc.file, func(t *testing.T) {
			log, err := ParseEventLog(readLog(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			mr := log.Replay()
			for i, want := range tc.rtmr {
				if got := mr[i].String(); got != want {
					t.Errorf("RTMR%d = %s, source states %s", i, got, want)
				}
			}
			if mr[3] != (Digest384{}) {
				t.Errorf("RTMR3 = %s: the firmware does not extend it", mr[3])
			}
			table, err := ParseCCEL(readLog(t, tc.table))
			if err != nil {
				t.Fatal(err)
			}
			if table.CCType != ccTypeTDX || table.LAML == 0 || uint64(log.Size) > table.LAML {
				t.Errorf("CCEL table %+v for a %d-byte log", table, log.Size)
			}
			// With the log as its own reference every register matches.
			if x := Explain(log, LogRTMRs(log)); x.Any() {
				t.Errorf("log differs from itself: %+v", x.Registers)
			}
		})
	}
}

// TestExplainNamesChangedEvent changes one event of a real log (its SHA-384
// digest) and expects that event, and only its register, reported.
func TestExplainNamesChangedEvent(t *testing.T) {
	raw := readLog(t, "cos-113-intel-tdx.bin")
	good, err := ParseEventLog(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := LogRTMRs(good)
	for _, reg := range []int{0, 1, 2} {
		// The second event of each register, located by its digest.
		var target LogEvent
		n := 0
		for _, e := range good.Events {
			if e.RTMR() == reg {
				if n == 1 {
					target = e
					break
				}
				n++
			}
		}
		if target.Seq == 0 {
			t.Fatalf("RTMR%d has fewer than 2 events", reg)
		}
		bad := bytes.Clone(raw)
		at := bytes.Index(bad[target.Offset:], target.SHA384[:]) + target.Offset
		bad[at] ^= 0xff
		log, err := ParseEventLog(bad)
		if err != nil {
			t.Fatal(err)
		}
		x := Explain(log, want)
		for i, r := range x.Registers {
			if (i == reg) == r.Match {
				t.Errorf("changed RTMR%d: %s match = %v", reg, r.Register, r.Match)
			}
		}
		d := x.Registers[reg].First
		if d == nil || d.Position != 1 || d.Seq != target.Seq || d.Offset != target.Offset {
			t.Fatalf("changed RTMR%d event seq %d: first difference %+v", reg, target.Seq, d)
		}
		if d.Expected != target.SHA384.String() || d.Log == d.Expected || d.LogEvent != target.Describe() || d.Cause == "" {
			t.Errorf("changed RTMR%d: %+v", reg, d)
		}
		var out strings.Builder
		if err := x.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "first difference: event 1 of RTMR") {
			t.Errorf("table:\n%s", out.String())
		}
	}
}

// TestExplainCauses: berth's event names map to causes, and a log with an
// extra or a missing event says so.
func TestExplainCauses(t *testing.T) {
	d := func(s string) Digest384 { return sha384([]byte(s)) }
	want := &RTMRValues{Events: []TDXEvent{
		{RTMR: 1, Event: "kernel (Authenticode)", Digest: d("k")},
		{RTMR: 2, Event: "kernel command line", Digest: d("c")},
	}}
	want.RTMR = replay(want.Events)
	log := &EventLog{Events: []LogEvent{
		{Seq: 1, MRIndex: 2, Type: evEFIBase + 3, SHA384: d("other kernel")},
		{Seq: 2, MRIndex: 3, Type: evEventTag, SHA384: d("c")},
		{Seq: 3, MRIndex: 3, Type: evEventTag, SHA384: d("extra")},
	}}
	x := Explain(log, want)
	if !x.Registers[0].Match {
		t.Errorf("RTMR0 (empty on both sides) differs")
	}
	if c := x.Registers[1].First; c == nil || !strings.Contains(c.Cause, "another kernel") || c.ExpectedEvent != "kernel (Authenticode)" {
		t.Errorf("RTMR1: %+v", c)
	}
	if c := x.Registers[2].First; c == nil || c.Position != 1 || c.Expected != "" || !strings.Contains(c.Cause, "more than berth expects") {
		t.Errorf("RTMR2: %+v", c)
	}
	x = Explain(&EventLog{}, want)
	if c := x.Registers[2].First; c == nil || c.Seq != -1 || !strings.Contains(c.Cause, "fewer events") || !strings.Contains(c.Cause, "command line") {
		t.Errorf("empty log RTMR2: %+v", c)
	}
}

func TestEventLogRefusesMalformed(t *testing.T) {
	raw := readLog(t, "cos-113-intel-tdx-dupe-separator-unpadded.bin")
	good, err := ParseEventLog(raw)
	if err != nil {
		t.Fatal(err)
	}
	ev := good.Events[0]
	mut := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(raw)) }
	tests := []struct {
		name   string
		in     []byte
		offset int
		field  string
	}{
		{"empty", nil, 0, "header pcrIndex"},
		{"header type", mut(func(b []byte) []byte { b[4] = 1; return b }), 4, "header eventType"},
		{"signature", mut(func(b []byte) []byte { b[32] = 'X'; return b }), 32, "Spec ID signature"},
		{"algorithm count", mut(func(b []byte) []byte { b[32+24] = 0xff; return b }), 32 + 24, "numberOfAlgorithms"},
		{"truncated event", raw[:len(raw)-3], -1, "eventSize"},
		{"MR index", mut(func(b []byte) []byte { b[ev.Offset] = 9; return b }), ev.Offset, "mrIndex"},
		{"digest count", mut(func(b []byte) []byte { b[ev.Offset+8] = 7; return b }), ev.Offset + 8, "digests.count"},
		{"algorithm", mut(func(b []byte) []byte { b[ev.Offset+12] = 0x77; return b }), ev.Offset + 12, "digests.hashAlg"},
		{"event size", mut(func(b []byte) []byte {
			p := ev.Offset + 12 + 2 + 48
			b[p+3] = 0x7f
			return b
		}), ev.Offset + 12 + 2 + 48, "eventSize"},
		{"data after padding", append(bytes.Clone(raw), append(bytes.Repeat([]byte{0xff}, 16), 1)...), len(raw), "padding"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEventLog(tc.in)
			var le *EventLogError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want an EventLogError", err)
			}
			if le.Field != tc.field || (tc.offset >= 0 && le.Offset != tc.offset) {
				t.Errorf("err = %v: want field %q at offset %#x", err, tc.field, tc.offset)
			}
		})
	}
	table := readLog(t, "CCEL.bin")
	for _, tc := range []struct {
		name  string
		in    []byte
		field string
	}{
		{"short", table[:40], "CCEL table"},
		{"signature", append([]byte("XCEL"), table[4:]...), "CCEL signature"},
		{"checksum", append(bytes.Clone(table[:40]), append([]byte{1}, table[41:]...)...), "CCEL checksum"},
	} {
		t.Run("CCEL "+tc.name, func(t *testing.T) {
			_, err := ParseCCEL(tc.in)
			var le *EventLogError
			if !errors.As(err, &le) || le.Field != tc.field {
				t.Errorf("err = %v, want field %q", err, tc.field)
			}
		})
	}
}

func TestEventDescribe(t *testing.T) {
	log, err := ParseEventLog(readLog(t, "cos-113-intel-tdx.bin"))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, e := range log.Events {
		all = append(all, e.Describe())
	}
	joined := strings.Join(all, "\n")
	for _, want := range []string{"EV_SEPARATOR", "EV_EFI_VARIABLE_DRIVER_CONFIG SecureBoot", "EV_EFI_ACTION \"Exit Boot Services Invocation\"", "EV_EFI_BOOT_SERVICES_APPLICATION"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no event described as %q in:\n%s", want, joined)
		}
	}
}

// The seeds live in testdata/fuzz/FuzzParseEventLog: the real logs (the
// padded one cut to its first 20000 bytes) and a header alone.
func FuzzParseEventLog(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		log, err := ParseEventLog(b)
		if err != nil {
			var le *EventLogError
			if !errors.As(err, &le) || le.Offset < 0 || le.Offset > len(b) {
				t.Fatalf("error %v: not an EventLogError within the input", err)
			}
			return
		}
		_ = log.Replay()
		for _, e := range log.Events {
			_ = e.Describe()
		}
		_ = Explain(log, LogRTMRs(log))
	})
}

// The seeds live in testdata/fuzz/FuzzParseCCEL: both real tables.
func FuzzParseCCEL(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseCCEL(b)
	})
}
