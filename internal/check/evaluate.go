package check

import (
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/internal/facts"
	"berth.dev/berth/platform"
)

// Finding is the result of one check on one platform. The Outcome is
// shared by every platform on which the check gave the same result, which
// keeps evaluating hundreds of platforms cheap; in JSON its fields appear
// inline.
type Finding struct {
	*Outcome
	// Status is the effective result on the platform, after severity,
	// --ignore and --strict.
	Status Status `json:"status" jsonschema:"type=string,enum=pass,enum=warn,enum=fail,enum=skip,enum=unknown"`
	// Severity is what a failure of this check means on the platform.
	Severity Severity `json:"severity" jsonschema:"type=string,enum=fail,enum=warn"`
	// Ignored is set when a failure was demoted to a warning by --ignore.
	Ignored bool `json:"ignored,omitempty"`
}

// Outcome is what a check found, independent of the platform's severity.
type Outcome struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Parent string `json:"parent,omitempty"`
	// Depth is the finding's depth in the check tree (0 for a root).
	Depth int `json:"depth"`
	// Raw is the check's own result before severity, --ignore and --strict.
	Raw      Status     `json:"raw" jsonschema:"type=string,enum=pass,enum=warn,enum=fail,enum=skip,enum=unknown"`
	Message  string     `json:"message,omitempty"`
	Evidence []Evidence `json:"evidence,omitempty"`
	Remedy   string     `json:"remedy,omitempty"`
}

// VerdictStatus is the conclusion for one platform.
type VerdictStatus string

// The verdicts.
const (
	Ready             VerdictStatus = "ready"
	ReadyWithWarnings VerdictStatus = "ready-with-warnings"
	NotReady          VerdictStatus = "not-ready"
)

// Verdict is the conclusion for one platform and the findings behind it.
type Verdict struct {
	// Platform is the canonical platform name (platform.Platform.String).
	Platform string `json:"platform"`
	// Name is the DNS-label name (handler and label names).
	Name   string        `json:"name"`
	Status VerdictStatus `json:"verdict"`
	// BlockedBy is the ID of the first blocking check in tree order (the
	// root cause rather than its consequences), with its remedy.
	BlockedBy string `json:"blockedBy,omitempty"`
	Remedy    string `json:"remedy,omitempty"`
	Failures  int    `json:"failures"`
	Warnings  int    `json:"warnings"`
	Unknowns  int    `json:"unknowns"`
	// Findings are every applicable check in catalogue (tree) order.
	Findings []Finding `json:"findings"`
}

// Options change how results become verdicts.
type Options struct {
	// Ignore demotes failures of the listed checks to warnings.
	Ignore Ignore
	// Strict makes warnings and unknowns (not ignored failures) block.
	Strict bool
}

// Evaluator runs a catalogue of checks. Build it with NewEvaluator.
type Evaluator struct {
	checks []Check
	parent []int // index of the parent check, -1 for roots
	depth  []int
}

// NewEvaluator validates the catalogue (unique IDs, parents known and
// listed before their children) and returns an evaluator for it.
func NewEvaluator(checks []Check) (*Evaluator, error) {
	e := &Evaluator{checks: checks, parent: make([]int, len(checks)), depth: make([]int, len(checks))}
	idx := make(map[string]int, len(checks))
	for i := range checks {
		c := &checks[i]
		if err := c.Validate(); err != nil {
			return nil, err
		}
		if _, dup := idx[c.ID]; dup {
			return nil, fmt.Errorf("check %s: duplicate ID", c.ID)
		}
		e.parent[i] = -1
		if c.Parent != "" {
			p, ok := idx[c.Parent]
			if !ok {
				return nil, fmt.Errorf("check %s: parent %q is not listed before it", c.ID, c.Parent)
			}
			e.parent[i] = p
			e.depth[i] = e.depth[p] + 1
		}
		idx[c.ID] = i
	}
	return e, nil
}

// Checks returns the catalogue.
func (e *Evaluator) Checks() []Check { return e.checks }

// Evaluate runs every check against every platform and returns one verdict
// per platform, in the order given.
//
// The debug variant only selects guest images, which no host check can
// see, so a platform's debug twin reuses the findings of the platform
// without it, evaluating again only the checks whose result can differ:
// RunFor checks without a Key, or whose Key tells the twins apart (the
// runtime handler check, whose handler name contains "debug"), and the
// children of a check whose result changed. Applies must therefore not
// depend on Platform.Debug; the checks package tests that it does not.
func (e *Evaluator) Evaluate(f *facts.Facts, ps []platform.Platform, opt Options) []Verdict {
	n := len(e.checks)
	// Host-wide results and unknown evidence are computed once, however
	// many platforms there are; platform results are memoised by Key.
	host := make([]*Outcome, n)
	unknown := make([]*Result, n)
	skipped := make([]*Outcome, n)
	for i := range e.checks {
		unknown[i] = unknownEvidence(f, &e.checks[i])
	}
	memo := make([]map[platform.Spec]*Outcome, n)
	raw := make([]Status, n)
	// lastKey[i] is the memo key run computed for check i on the platform
	// being evaluated; full keeps it per platform for the debug twins.
	lastKey := make([]platform.Spec, n)

	// run evaluates check i on p; raw holds the results of p's checks so
	// far, so that a failed or skipped parent skips its children.
	run := func(i int, p platform.Platform) *Outcome {
		c := &e.checks[i]
		var readsUnknown *Result
		if c.ReadsFor != nil && len(f.Unknown) > 0 {
			readsUnknown = unknownFields(f, c.ReadsFor(p))
		}
		switch pi := e.parent[i]; {
		case pi >= 0 && (raw[pi] == Fail || raw[pi] == Skip):
			if skipped[i] == nil {
				skipped[i] = e.outcome(i, Result{Status: Skip, Message: "skipped: prerequisite " + c.Parent + " did not pass"})
			}
			return skipped[i]
		case unknown[i] != nil:
			if host[i] == nil {
				host[i] = e.outcome(i, *unknown[i])
			}
			return host[i]
		case c.Run != nil:
			if host[i] == nil {
				host[i] = e.outcome(i, c.Run(f))
			}
			return host[i]
		case readsUnknown != nil:
			return e.outcome(i, *readsUnknown)
		case c.Key != nil || c.KeyFacts != nil:
			k, _ := c.key(f, p)
			lastKey[i] = k
			if memo[i] == nil {
				memo[i] = map[platform.Spec]*Outcome{}
			}
			o := memo[i][k]
			if o == nil {
				o = e.outcome(i, c.RunFor(f, p))
				memo[i][k] = o
			}
			return o
		default:
			return e.outcome(i, c.RunFor(f, p))
		}
	}

	// Evaluate the platforms without the debug variant first, in full.
	out := make([]Verdict, len(ps))
	base := make(map[platform.Spec]int, len(ps))
	var twins []int
	for j, p := range ps {
		if p.Debug() {
			twins = append(twins, j)
			continue
		}
		base[p.Spec()] = j
	}
	// One backing array for every platform's findings: hundreds of
	// platforms times dozens of checks would otherwise be hundreds of
	// allocations that dominate the evaluation.
	all := make([]Finding, 0, n*len(ps))
	// at[j][i] is the index in all of platform j's finding of check i, or
	// -1 when the check does not apply.
	at := make([][]int32, len(ps))
	keys := make([][]platform.Spec, len(ps))
	finish := func(j int, p platform.Platform, start int) {
		v := Verdict{Platform: p.String(), Name: p.Name(), Findings: all[start:len(all):len(all)]}
		for _, fd := range v.Findings {
			v.add(fd)
		}
		v.conclude()
		out[j] = v
	}
	add := func(j, i int, o *Outcome, sev Severity) {
		fd := Finding{Outcome: o, Severity: sev}
		fd.Status = effective(o.Raw, sev, opt, e.checks[i].ID, &fd.Ignored)
		at[j][i] = int32(len(all))
		all = append(all, fd)
		raw[i] = o.Raw
	}
	full := func(j int, p platform.Platform) {
		at[j] = make([]int32, n)
		clear(lastKey)
		start := len(all)
		for i := range e.checks {
			raw[i] = 0
			at[j][i] = -1
			sev, ok := e.checks[i].Applies(p)
			if !ok {
				continue
			}
			add(j, i, run(i, p), sev)
		}
		keys[j] = slices.Clone(lastKey)
		finish(j, p, start)
	}
	for j, p := range ps {
		if !p.Debug() {
			full(j, p)
		}
	}
	for _, j := range twins {
		p := ps[j]
		s := p.Spec()
		s.Debug = false
		b, ok := base[s]
		if !ok {
			full(j, p)
			continue
		}
		at[j] = make([]int32, n)
		start := len(all)
		for i := range e.checks {
			raw[i] = 0
			at[j][i] = -1
			k := at[b][i]
			if k < 0 {
				continue
			}
			bf := all[k]
			c := &e.checks[i]
			pi := e.parent[i]
			same := c.Run != nil
			if !same {
				kp, keyed := c.key(f, p)
				same = keyed && kp == keys[b][i]
			}
			same = same &&
				(pi < 0 || at[b][pi] < 0 || raw[pi] == all[at[b][pi]].Raw)
			if same {
				add(j, i, bf.Outcome, bf.Severity)
				continue
			}
			add(j, i, run(i, p), bf.Severity)
		}
		finish(j, p, start)
	}
	return out
}

func (e *Evaluator) outcome(i int, r Result) *Outcome {
	c := &e.checks[i]
	return &Outcome{ID: c.ID, Title: c.Title, Parent: c.Parent, Depth: e.depth[i],
		Raw: r.Status, Message: r.Message, Evidence: r.Evidence, Remedy: r.Remedy}
}

// effective maps a raw status to what it means on a platform.
func effective(s Status, sev Severity, opt Options, id string, ignored *bool) Status {
	if s == Fail && sev == Warning {
		s = Warn
	}
	if s == Fail && opt.Ignore.Matches(id) {
		*ignored = true
		return Warn
	}
	if opt.Strict && !*ignored && (s == Warn || s == Unknown) {
		return Fail
	}
	return s
}

func (v *Verdict) add(fd Finding) {
	switch fd.Status {
	case Fail:
		if v.Failures == 0 {
			v.BlockedBy, v.Remedy = fd.ID, fd.Remedy
		}
		v.Failures++
	case Warn:
		v.Warnings++
	case Unknown:
		v.Unknowns++
	}
}

func (v *Verdict) conclude() {
	switch {
	case v.Failures > 0:
		v.Status = NotReady
	case v.Warnings > 0 || v.Unknowns > 0:
		v.Status = ReadyWithWarnings
	default:
		v.Status = Ready
	}
}

// unknownEvidence returns the Unknown result for c when a fact it declares
// is unknown, or nil. The evaluator applies it before running the check,
// so no check can pass on evidence nobody could read.
func unknownEvidence(f *facts.Facts, c *Check) *Result { return unknownFields(f, c.Reads) }

// unknownFields returns the Unknown result when one of fields is unknown.
func unknownFields(f *facts.Facts, fields []string) *Result {
	if len(f.Unknown) == 0 {
		return nil
	}
	var ev []Evidence
	for _, field := range fields {
		if reason, ok := unknownReason(f, field); ok {
			ev = append(ev, Evidence{Field: field, Value: "unknown (" + reason + ")"})
		}
	}
	if len(ev) == 0 {
		return nil
	}
	names := make([]string, len(ev))
	for i, e := range ev {
		names[i] = e.Field
	}
	return &Result{
		Status:   Unknown,
		Message:  "cannot tell: " + strings.Join(names, ", ") + " unknown",
		Evidence: ev,
		Remedy:   "run berth on the live host (as root) or give a root where these facts can be read",
	}
}

// unknownReason is facts.UnknownReason, extended so that a declared field
// is also unknown when one of its children is (a check that reads
// "devices.nodes" depends on "devices.nodes.dev/kvm").
func unknownReason(f *facts.Facts, field string) (string, bool) {
	if r, ok := f.UnknownReason(field); ok {
		return r, true
	}
	for _, m := range f.Unknown {
		if strings.HasPrefix(m.Field, field+".") {
			return m.Field + ": " + m.Reason, true
		}
	}
	return "", false
}
