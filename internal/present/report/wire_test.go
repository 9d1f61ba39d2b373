package report

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"sigs.k8s.io/yaml"
)

// TestWireSharesFindings writes findings and lists of findings once,
// however many verdicts share them, and reads the report back as it was,
// from JSON and from YAML.
func TestWireSharesFindings(t *testing.T) {
	kvm := &check.Outcome{ID: "kvm.device", Title: "KVM device", Raw: check.Pass, Message: "/dev/kvm"}
	snp := &check.Outcome{ID: "snp.kernel", Title: "SNP kernel", Raw: check.Fail, Remedy: "upgrade"}
	pass := check.Finding{Outcome: kvm, Status: check.Pass, Severity: check.Blocking}
	failSNP := check.Finding{Outcome: snp, Status: check.Fail, Severity: check.Blocking}
	warnSNP := check.Finding{Outcome: snp, Status: check.Warn, Severity: check.Warning}
	verdict := func(name string, st check.VerdictStatus, fs ...check.Finding) check.Verdict {
		return check.Verdict{Platform: name, Name: name, Status: st, Findings: fs}
	}
	tests := []struct {
		name             string
		verdicts         []check.Verdict
		findings, lists  int
		wantListOfSecond int
	}{
		{"none", nil, 0, 0, -1},
		{"one", []check.Verdict{verdict("a", check.Ready, pass)}, 1, 1, -1},
		{"same list", []check.Verdict{verdict("a", check.NotReady, pass, failSNP), verdict("b", check.NotReady, pass, failSNP)}, 2, 1, 0},
		{"same outcome, other severity", []check.Verdict{verdict("a", check.NotReady, pass, failSNP), verdict("b", check.ReadyWithWarnings, pass, warnSNP)}, 3, 2, 1},
		{"shorter list", []check.Verdict{verdict("a", check.NotReady, pass, failSNP), verdict("b", check.Ready, pass)}, 2, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{Header: Header{Kind: Kind, SchemaVersion: SchemaVersion, Mode: "matrix"}, Verdicts: tt.verdicts}
			if r.Verdicts == nil {
				r.Verdicts = []check.Verdict{}
			}
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var w wireReport
			if err := json.Unmarshal(b, &w); err != nil {
				t.Fatal(err)
			}
			if len(w.Findings) != tt.findings || len(w.FindingLists) != tt.lists {
				t.Errorf("%d findings in %d lists, want %d in %d: %s", len(w.Findings), len(w.FindingLists), tt.findings, tt.lists, b)
			}
			if tt.wantListOfSecond >= 0 && w.Verdicts[1].Findings != tt.wantListOfSecond {
				t.Errorf("second verdict names list %d, want %d", w.Verdicts[1].Findings, tt.wantListOfSecond)
			}
			y, err := yaml.JSONToYAML(b)
			if err != nil {
				t.Fatal(err)
			}
			for _, enc := range []struct {
				name   string
				decode func(*Report) error
			}{
				{"json", func(got *Report) error { return json.Unmarshal(b, got) }},
				{"yaml", func(got *Report) error { return yaml.Unmarshal(y, got) }},
			} {
				var got Report
				if err := enc.decode(&got); err != nil {
					t.Fatalf("%s: %v", enc.name, err)
				}
				if !reflect.DeepEqual(&got, r) {
					t.Errorf("%s: read back %+v, want %+v", enc.name, got, *r)
				}
			}
		})
	}
}

// TestWireRejects refuses another schema version and references out of
// range rather than inventing findings.
func TestWireRejects(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"version 1", `{"schemaVersion":1,"verdicts":[]}`, "schemaVersion 1"},
		{"list out of range", `{"schemaVersion":2,"findings":[],"findingLists":[],"verdicts":[{"platform":"p","findings":0}]}`, "finding list 0 of 0"},
		{"finding out of range", `{"schemaVersion":2,"findings":[],"findingLists":[[3]],"verdicts":[{"platform":"p","findings":0}]}`, "finding 3 of 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Report
			err := json.Unmarshal([]byte(tt.doc), &r)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
