package plugin

import (
	"strings"
	"testing"
)

func TestParseOutput(t *testing.T) {
	tests := []struct {
		name         string
		in           string
		wantFindings int
		wantFacts    int
		wantErr      string
	}{
		{name: "good", in: goodOutput, wantFindings: 1, wantFacts: 1},
		{name: "minimal", in: `{"schemaVersion":1}` + "\n"},
		{name: "empty", in: " \n", wantErr: "empty, expected a JSON object"},
		{name: "not json", in: "OK\n", wantErr: "invalid JSON output at byte offset 1"},
		{name: "unknown field", in: `{"schemaVersion":1,"finding":[]}`, wantErr: `unknown field "finding"`},
		{name: "wrong type", in: `{"schemaVersion":"1"}`, wantErr: "invalid JSON output at byte offset 20"},
		{name: "two objects", in: `{"schemaVersion":1}{}`, wantErr: "data after the object"},
		{name: "no version", in: `{"facts":{}}`, wantErr: "schemaVersion 0 not supported, expected 1"},
		{name: "bad fact", in: `{"schemaVersion":1,"facts":{"ok":"1","bad key":"2"}}`, wantFacts: 1, wantErr: `fact "bad key": invalid key`},
		{name: "bad id", in: `{"schemaVersion":1,"findings":[{"id":"Site.X","status":"pass","title":"t"}]}`, wantErr: `finding 0: invalid id "Site.X"`},
		{name: "one segment", in: `{"schemaVersion":1,"findings":[{"id":"site","status":"pass","title":"t"}]}`, wantErr: `invalid id "site"`},
		{name: "bad status", in: `{"schemaVersion":1,"findings":[{"id":"a.b","status":"PASS","title":"t"}]}`, wantErr: `invalid status "PASS", expected one of pass, warn, fail, unknown`},
		{name: "no title", in: `{"schemaVersion":1,"findings":[{"id":"a.b","status":"fail"}]}`, wantErr: "title is required"},
		{name: "escape", in: `{"schemaVersion":1,"findings":[{"id":"a.b","status":"fail","title":"x\u001b[2J"}]}`, wantErr: "control character U+001B"},
		{name: "duplicate", in: `{"schemaVersion":1,"findings":[{"id":"a.b","status":"fail","title":"x"},{"id":"a.b","status":"pass","title":"y"}]}`, wantFindings: 1, wantErr: `finding 1: duplicate id "a.b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ParseOutput([]byte(tt.in))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err=%v, want %q", err, tt.wantErr)
			}
			if len(out.Findings) != tt.wantFindings || len(out.Facts) != tt.wantFacts {
				t.Errorf("kept %d findings and %d facts, want %d and %d", len(out.Findings), len(out.Facts), tt.wantFindings, tt.wantFacts)
			}
		})
	}
}

// FuzzCheckOutput: whatever a check prints, parsing never panics and what
// is kept is valid.
func FuzzCheckOutput(f *testing.F) {
	f.Add([]byte(goodOutput))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _ := ParseOutput(b)
		for k, v := range out.Facts {
			if ValidateKey(k) != nil || ValidateValue(v) != nil {
				t.Fatalf("kept invalid fact %q=%q", k, v)
			}
		}
		for _, f := range out.Findings {
			if err := validateFinding(f); err != nil {
				t.Fatalf("kept invalid finding %+v: %v", f, err)
			}
		}
	})
}
