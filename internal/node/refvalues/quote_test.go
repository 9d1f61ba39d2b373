package refvalues

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
)

// dstackSample is dstack's verifier fixture: a real TDX quote (v4) with the
// event log of the same TD (testdata/eventlogs/SOURCES.md).
func dstackSample(t testing.TB) (quote []byte, log []byte) {
	var f struct {
		Quote    string `json:"quote"`
		EventLog string `json:"event_log"`
	}
	if err := json.Unmarshal(readLog(t, "dstack-quote-report.json"), &f); err != nil {
		t.Fatal(err)
	}
	q, err := hex.DecodeString(f.Quote)
	if err != nil {
		t.Fatal(err)
	}
	return q, []byte(f.EventLog)
}

// TestQuoteReplay: the dstack TD's log replays to RTMR0-3 of its own quote;
// a log with one event changed does not, and explain names the register.
func TestQuoteReplay(t *testing.T) {
	raw, logJSON := dstackSample(t)
	q, err := ParseTDXQuote(raw)
	if err != nil {
		t.Fatal(err)
	}
	if q.Version != 4 || q.MRTD == (Digest384{}) {
		t.Fatalf("quote %+v", q)
	}
	log, err := ParseDstackEventLog(logJSON)
	if err != nil {
		t.Fatal(err)
	}
	if got := log.Replay(); got != q.RTMR {
		t.Fatalf("replay %v, quote %v", got, q.RTMR)
	}
	x := Explain(log, LogRTMRs(log))
	x.CheckQuote(q)
	if x.QuoteMismatch() || x.Any() {
		t.Fatalf("sample against itself: %+v", x.Registers)
	}
	// Change RTMR1's second event: the quote no longer matches RTMR1, and
	// against the original as reference that event is the first difference.
	want := LogRTMRs(log)
	n := 0
	for i, e := range log.Events {
		if e.RTMR() == 1 {
			if n == 1 {
				log.Events[i].SHA384[0] ^= 1
				break
			}
			n++
		}
	}
	x = Explain(log, want)
	x.CheckQuote(q)
	for i, r := range x.Registers {
		if r.QuoteMatch == (i == 1) || r.Match == (i == 1) {
			t.Errorf("%s: quote match %v, reference match %v", r.Register, r.QuoteMatch, r.Match)
		}
	}
	if d := x.Registers[1].First; d == nil || d.Position != 1 {
		t.Errorf("first difference %+v", d)
	}
}

func TestQuoteRefusesMalformed(t *testing.T) {
	raw, _ := dstackSample(t)
	mut := func(f func(b []byte)) []byte { b := bytes.Clone(raw); f(b); return b }
	for _, tc := range []struct {
		name  string
		in    []byte
		field string
	}{
		{"short", raw[:20], "header"},
		{"tee", mut(func(b []byte) { b[4] = 0 }), "tee_type"},
		{"version", mut(func(b []byte) { b[0] = 3 }), "version"},
		{"v5 body type", mut(func(b []byte) { b[0] = 5; b[48] = 9 }), "body type"},
		{"truncated body", raw[:48+100], "TD report body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTDXQuote(tc.in)
			var le *EventLogError
			if !errors.As(err, &le) || le.Field != tc.field {
				t.Errorf("err = %v, want field %q", err, tc.field)
			}
		})
	}
}

// The seeds live in testdata/fuzz/FuzzParseTDXQuote: the dstack quote.
func FuzzParseTDXQuote(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseTDXQuote(b); err != nil {
			var le *EventLogError
			if !errors.As(err, &le) || le.Offset < 0 || le.Offset > len(b) {
				t.Fatalf("error %v: not an EventLogError within the input", err)
			}
		}
	})
}
