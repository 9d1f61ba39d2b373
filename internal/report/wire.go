package report

import (
	"encoding/json"
	"fmt"
	"strconv"

	"berth.dev/berth/internal/check"
)

// The report as JSON and YAML carry it. Since schema version 2 a finding
// is written once, in the top-level findings list; a list of findings
// (indexes into it) is written once, in findingLists; and each verdict
// names its list by index. Platforms share both: the evaluator runs a
// check once per distinct key, so of 1,162 platforms' 40,000 findings a
// host has a few hundred distinct findings in a few hundred distinct
// lists. `berth check --all -o json` went from 7.1 MB, where every
// platform repeated its findings, to under 0.5 MB.

// wireReport is Report on the wire.
type wireReport struct {
	Header
	// Findings are the distinct findings of all verdicts, each once, in
	// the order the verdicts first list them.
	Findings []check.Finding `json:"findings"`
	// FindingLists are the distinct lists of findings of the verdicts,
	// each once: indexes into Findings, in catalogue (tree) order.
	FindingLists [][]int `json:"findingLists"`
	// Verdicts hold every evaluated platform; each names its list of
	// findings by its index in FindingLists.
	Verdicts []wireVerdict `json:"verdicts"`
}

// wireVerdict is check.Verdict with its findings by index.
type wireVerdict struct {
	// Platform is the canonical platform name (platform.Platform.String).
	Platform string `json:"platform"`
	// Name is the DNS-label name (handler and label names).
	Name   string              `json:"name"`
	Status check.VerdictStatus `json:"verdict" jsonschema:"enum=ready,enum=ready-with-warnings,enum=not-ready"`
	// BlockedBy is the ID of the first blocking check in tree order (the
	// root cause rather than its consequences), with its remedy.
	BlockedBy string `json:"blockedBy,omitempty"`
	Remedy    string `json:"remedy,omitempty"`
	Failures  int    `json:"failures"`
	Warnings  int    `json:"warnings"`
	Unknowns  int    `json:"unknowns"`
	// Findings is the index of the verdict's list of findings in the
	// report's findingLists.
	Findings int `json:"findings"`
}

// findingKey identifies a finding: the evaluator shares one *Outcome
// among the platforms a check's result holds for, and the platform adds
// only the effective status, severity and --ignore mark.
type findingKey struct {
	outcome  *check.Outcome
	status   check.Status
	severity check.Severity
	ignored  bool
}

// MarshalJSON writes the report with each finding and each list of
// findings once (schema version 2).
func (r *Report) MarshalJSON() ([]byte, error) { return json.Marshal(r.wire()) }

// WireValue is what MarshalJSON encodes (output.Wire).
func (r *Report) WireValue() any { return r.wire() }

// wire returns the report as JSON carries it.
func (r *Report) wire() *wireReport {
	w := &wireReport{
		Header:   r.Header,
		Findings: []check.Finding{}, FindingLists: [][]int{}, Verdicts: make([]wireVerdict, len(r.Verdicts)),
	}
	findings := map[findingKey]int{}
	lists := map[string]int{}
	var key []byte
	for i, v := range r.Verdicts {
		list := make([]int, len(v.Findings))
		key = key[:0]
		for j, f := range v.Findings {
			k := findingKey{f.Outcome, f.Status, f.Severity, f.Ignored}
			n, ok := findings[k]
			if !ok {
				n = len(w.Findings)
				findings[k] = n
				w.Findings = append(w.Findings, f)
			}
			list[j] = n
			key = strconv.AppendInt(key, int64(n), 10)
			key = append(key, ',')
		}
		n, ok := lists[string(key)]
		if !ok {
			n = len(w.FindingLists)
			lists[string(key)] = n
			w.FindingLists = append(w.FindingLists, list)
		}
		w.Verdicts[i] = wireVerdict{
			Platform: v.Platform, Name: v.Name, Status: v.Status, BlockedBy: v.BlockedBy, Remedy: v.Remedy,
			Failures: v.Failures, Warnings: v.Warnings, Unknowns: v.Unknowns, Findings: n,
		}
	}
	return w
}

// UnmarshalJSON reads a report of this schema version, resolving each
// verdict's findings (which then share their outcomes).
func (r *Report) UnmarshalJSON(b []byte) error {
	var w wireReport
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.SchemaVersion != SchemaVersion {
		return fmt.Errorf("check report schemaVersion %d, want %d", w.SchemaVersion, SchemaVersion)
	}
	*r = Report{Header: w.Header, Verdicts: make([]check.Verdict, len(w.Verdicts))}
	for i, wv := range w.Verdicts {
		if wv.Findings < 0 || wv.Findings >= len(w.FindingLists) {
			return fmt.Errorf("verdict %s: finding list %d of %d", wv.Platform, wv.Findings, len(w.FindingLists))
		}
		list := w.FindingLists[wv.Findings]
		v := check.Verdict{
			Platform: wv.Platform, Name: wv.Name, Status: wv.Status, BlockedBy: wv.BlockedBy, Remedy: wv.Remedy,
			Failures: wv.Failures, Warnings: wv.Warnings, Unknowns: wv.Unknowns, Findings: make([]check.Finding, len(list)),
		}
		for j, n := range list {
			if n < 0 || n >= len(w.Findings) {
				return fmt.Errorf("verdict %s: finding %d of %d", wv.Platform, n, len(w.Findings))
			}
			v.Findings[j] = w.Findings[n]
		}
		r.Verdicts[i] = v
	}
	return nil
}
