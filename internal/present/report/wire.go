package report

import (
	"encoding/json"
	"fmt"
	"slices"

	"berth.dev/berth/internal/evaluate/check"
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
	x := r.index()
	w := &wireReport{
		Header:   r.Header,
		Findings: make([]check.Finding, len(x.findings)), FindingLists: make([][]int, len(x.listEnd)),
		Verdicts: make([]wireVerdict, len(r.Verdicts)),
	}
	for i, f := range x.findings {
		w.Findings[i] = *f
	}
	for k := range x.listEnd {
		ids := x.list(k)
		l := make([]int, len(ids))
		for j, id := range ids {
			l[j] = int(id)
		}
		w.FindingLists[k] = l
	}
	for i := range r.Verdicts {
		v := &r.Verdicts[i]
		w.Verdicts[i] = wireVerdict{
			Platform: v.Platform, Name: v.Name, Status: v.Status, BlockedBy: v.BlockedBy, Remedy: v.Remedy,
			Failures: v.Failures, Warnings: v.Warnings, Unknowns: v.Unknowns, Findings: int(x.listOf[i]),
		}
	}
	return w
}

// wireIndex is the sharing of wireReport without its copies: the
// distinct findings, the distinct lists of them, and each verdict's list.
// AppendJSON writes the report from it directly.
type wireIndex struct {
	// findings are the distinct findings, each where the verdicts first
	// list it.
	findings []*check.Finding
	// lists holds the distinct lists of indexes into findings, one after
	// the other; list k ends at listEnd[k].
	lists   []int32
	listEnd []int32
	// listOf[i] is the list of verdict i.
	listOf []int32
}

// list returns list k.
func (x *wireIndex) list(k int) []int32 {
	start := int32(0)
	if k > 0 {
		start = x.listEnd[k-1]
	}
	return x.lists[start:x.listEnd[k]]
}

// index finds the distinct findings and lists of the verdicts.
//
// It runs once per `berth check -o json`, over every finding of every
// verdict (some 20,000 with --all), so it avoids what is costly there:
// hashing each finding (a finding found at the same position in the
// previous verdict is taken from there, and the others are looked up by
// their outcome pointer alone), hashing each list (a debug twin whose
// findings are its base's shares the base's slice, found by its
// address), and allocating per verdict.
func (r *Report) index() *wireIndex {
	x := &wireIndex{listOf: make([]int32, len(r.Verdicts))}
	// head[o] is the index of the last finding added with outcome o;
	// next[n] links finding n to the one added before it with the same
	// outcome (another status, severity or --ignore mark), -1 at the end.
	head := map[*check.Outcome]int32{}
	var next []int32
	index := func(f *check.Finding) int32 {
		n, ok := head[f.Outcome]
		for ok && n >= 0 {
			g := x.findings[n]
			if g.Status == f.Status && g.Severity == f.Severity && g.Ignored == f.Ignored {
				return n
			}
			n = next[n]
		}
		n = int32(len(x.findings))
		x.findings = append(x.findings, f)
		if prev, ok := head[f.Outcome]; ok {
			next = append(next, prev)
		} else {
			next = append(next, -1)
		}
		head[f.Outcome] = n
		return n
	}
	type seen struct {
		key findingKey
		n   int32
	}
	var last []seen // the previous verdict's findings by position
	// byHash holds the lists by a hash of their indexes, colliding ones
	// chained through chain.
	byHash := map[uint64]int32{}
	var chain []int32
	bySlice := map[*check.Finding]int32{}
	for i := range r.Verdicts {
		v := &r.Verdicts[i]
		if len(v.Findings) > 0 {
			if k, ok := bySlice[&v.Findings[0]]; ok && len(x.list(int(k))) == len(v.Findings) {
				x.listOf[i] = k
				continue
			}
		}
		// The new list goes at the end of lists; it is dropped again if
		// it is there already.
		start := int32(len(x.lists))
		h := uint64(14695981039346656037) // FNV-1a over the indexes
		for j := range v.Findings {
			f := &v.Findings[j]
			k := findingKey{f.Outcome, f.Status, f.Severity, f.Ignored}
			var id int32
			if j < len(last) && last[j].key == k {
				id = last[j].n
			} else {
				id = index(f)
				if j < len(last) {
					last[j] = seen{k, id}
				} else {
					last = append(last, seen{k, id})
				}
			}
			x.lists = append(x.lists, id)
			h = (h ^ uint64(id)) * 1099511628211
		}
		ids := x.lists[start:]
		k, found := byHash[h]
		for found && k >= 0 && !slices.Equal(x.list(int(k)), ids) {
			k = chain[k]
		}
		if !found || k < 0 {
			k = int32(len(x.listEnd))
			x.listEnd = append(x.listEnd, int32(len(x.lists)))
			if prev, ok := byHash[h]; ok {
				chain = append(chain, prev)
			} else {
				chain = append(chain, -1)
			}
			byHash[h] = k
		} else {
			x.lists = x.lists[:start]
		}
		x.listOf[i] = k
		if len(v.Findings) > 0 {
			bySlice[&v.Findings[0]] = k
		}
	}
	return x
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
