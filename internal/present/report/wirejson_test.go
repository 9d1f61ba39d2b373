package report

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/present/output"
)

// encodingJSON is what Render wrote for r before AppendJSON: encoding/json
// of the wire form, indented and escaped.
func encodingJSON(t testing.TB, r *Report) []byte {
	t.Helper()
	b, err := output.EncodeJSON(r.WireValue())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appendJSON is what Render writes for r now.
func appendJSON(t testing.TB, r *Report) []byte {
	t.Helper()
	var w output.JSONWriter
	if err := r.AppendJSON(&w); err != nil {
		t.Fatal(err)
	}
	return append(w.Bytes(), '\n')
}

// sampleReport is a report with every optional field of the wire types
// set or unset as asked, and s in every string the host or a check
// provides.
func sampleReport(s string, full bool, n int) *Report {
	guest := full
	o1 := &check.Outcome{ID: "kvm.device" + s, Title: "KVM " + s, Depth: 0, Raw: check.Pass}
	o2 := &check.Outcome{ID: "snp.kernel", Title: "SNP", Depth: n, Raw: check.Fail}
	if full {
		o1.Parent, o1.Message, o1.Remedy = "virt"+s, "msg "+s, "fix "+s
		o1.Evidence = []check.Evidence{{Field: "devices.kvm" + s, Value: s}, {Field: "x", Value: ""}}
		o2.Evidence = []check.Evidence{}
	}
	fds := []check.Finding{
		{Outcome: o1, Status: check.Pass, Severity: check.Blocking},
		{Outcome: o2, Status: check.Warn, Severity: check.Warning, Ignored: full},
		{Outcome: o2, Status: check.Fail, Severity: check.Blocking},
		{Status: check.Skip},
	}
	r := &Report{Header: Header{Kind: Kind, SchemaVersion: SchemaVersion, Mode: "matrix" + s,
		Host:        Host{Root: "/host" + s, CollectedAt: time.Date(2026, 1, 1, 0, 0, n, n, time.UTC)},
		FactsDigest: "sha256:" + s,
		Options:     Opts{Probe: full},
		Summary:     Summary{Ready: n, ReadyWithWarnings: -n, NotReady: 1},
	}, Verdicts: []check.Verdict{}}
	if full {
		r.Host.Live, r.Host.Distribution, r.Host.CPU, r.Host.Guest = true, "k3s"+s, "EPYC"+s, &guest
		r.Host.Hypervisor, r.Host.Kernel = "kvm"+s, "6.14"+s
		r.Options = Opts{Platforms: []string{"a" + s, "b"}, All: true, Ignore: s, Strict: true}
	}
	for i := range n {
		v := check.Verdict{Platform: "p" + s, Name: "n", Status: check.Ready, Findings: fds[:i%(len(fds)+1)]}
		if full {
			v.Status, v.BlockedBy, v.Remedy, v.Failures, v.Warnings, v.Unknowns = check.NotReady, s, s, i, 2, 3
		}
		r.Verdicts = append(r.Verdicts, v)
	}
	return r
}

// TestAppendJSONEqualsEncodingJSON writes reports with and without every
// optional field, and with strings that need escapes, both ways.
func TestAppendJSONEqualsEncodingJSON(t *testing.T) {
	tests := []struct {
		name string
		s    string
		full bool
		n    int
	}{
		{"empty", "", false, 0},
		{"minimal", "", false, 3},
		{"full", "x", true, 7},
		{"escapes", "<\"\\\x00\n\x7f\u0085\u2028\ufffe\xff>&", true, 5},
		{"unicode", "日本 🚀 \u202e", true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleReport(tt.s, tt.full, tt.n)
			want, got := encodingJSON(t, r), appendJSON(t, r)
			if !bytes.Equal(got, want) {
				t.Errorf("got\n%s\nwant\n%s", got, want)
			}
			rendered, err := output.EncodeJSON(r)
			if err != nil || !bytes.Equal(rendered, want) {
				t.Errorf("EncodeJSON(report) differs: %v", err)
			}
		})
	}
}

// TestAppendJSONTimeOutOfRange: a time encoding/json refuses fails
// AppendJSON too, so that Render reports encoding/json's error rather
// than writing what it would not.
func TestAppendJSONTimeOutOfRange(t *testing.T) {
	r := sampleReport("", true, 1)
	r.Host.CollectedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	var w output.JSONWriter
	if err := r.AppendJSON(&w); err == nil {
		t.Error("AppendJSON of year 10000: no error")
	}
	if _, err := output.EncodeJSON(r); err == nil || !strings.Contains(err.Error(), "json") {
		t.Errorf("EncodeJSON of year 10000: %v, want encoding/json's error", err)
	}
}

// FuzzAppendJSON compares AppendJSON with encoding/json on reports with
// any strings and sizes.
func FuzzAppendJSON(f *testing.F) {
	f.Add("", false, uint8(0))
	f.Add("<&>\x7f\u0085\xff", true, uint8(9))
	f.Fuzz(func(t *testing.T, s string, full bool, n uint8) {
		r := sampleReport(s, full, int(n%32))
		if want, got := encodingJSON(t, r), appendJSON(t, r); !bytes.Equal(got, want) {
			t.Errorf("got\n%s\nwant\n%s", got, want)
		}
	})
}

// TestAppendJSONFields fails when a type on the wire gains, loses or
// renames a JSON field: AppendJSON writes each field by hand and must
// then be changed with it (and FuzzAppendJSON's sampleReport too).
func TestAppendJSONFields(t *testing.T) {
	tests := []struct {
		typ  reflect.Type
		want []string
	}{
		{reflect.TypeFor[wireReport](), []string{"Header", "findings", "findingLists", "verdicts"}},
		{reflect.TypeFor[Header](), []string{"kind", "schemaVersion", "mode", "host", "factsDigest", "options", "summary"}},
		{reflect.TypeFor[Host](), []string{"root", "live", "collectedAt", "distribution,omitempty", "cpu,omitempty",
			"guest,omitempty", "hypervisor,omitempty", "kernel,omitempty"}},
		{reflect.TypeFor[Opts](), []string{"platforms,omitempty", "all,omitempty", "ignore,omitempty", "strict,omitempty", "probe"}},
		{reflect.TypeFor[Summary](), []string{"ready", "readyWithWarnings", "notReady"}},
		{reflect.TypeFor[check.Finding](), []string{"Outcome", "status", "severity", "ignored,omitempty"}},
		{reflect.TypeFor[check.Outcome](), []string{"id", "title", "parent,omitempty", "depth", "raw", "message,omitempty",
			"evidence,omitempty", "remedy,omitempty"}},
		{reflect.TypeFor[check.Evidence](), []string{"field", "value"}},
		{reflect.TypeFor[wireVerdict](), []string{"platform", "name", "verdict", "blockedBy,omitempty", "remedy,omitempty",
			"failures", "warnings", "unknowns", "findings"}},
	}
	for _, tt := range tests {
		var got []string
		for f := range tt.typ.Fields() {
			tag := f.Tag.Get("json")
			if f.Anonymous && tag == "" {
				tag = f.Name
			}
			got = append(got, tag)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s fields %q, AppendJSON writes %q: change AppendJSON with them", tt.typ, got, tt.want)
		}
	}
}
