package check

import (
	"fmt"
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
	Status Status `json:"status"`
	// Severity is what a failure of this check means on the platform.
	Severity Severity `json:"severity"`
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
	Raw      Status     `json:"raw"`
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
func (e *Evaluator) Evaluate(f *facts.Facts, ps []platform.Platform, opt Options) []Verdict {
	n := len(e.checks)
	// Host-wide results and unknown evidence are computed once, however
	// many platforms there are.
	// Host-wide results and unknown evidence are computed once, however
	// many platforms there are; platform results are memoised by Key.
	host := make([]*Outcome, n)
	unknown := make([]*Result, n)
	skipped := make([]*Outcome, n)
	for i := range e.checks {
		unknown[i] = unknownEvidence(f, &e.checks[i])
	}
	memo := make([]map[platform.Spec]*Outcome, n)
	out := make([]Verdict, 0, len(ps))
	raw := make([]Status, n)
	for _, p := range ps {
		v := Verdict{Platform: p.String(), Name: p.Name(), Findings: make([]Finding, 0, n)}
		for i := range e.checks {
			c := &e.checks[i]
			raw[i] = ""
			sev, ok := c.Applies(p)
			if !ok {
				continue
			}
			var o *Outcome
			switch pi := e.parent[i]; {
			case pi >= 0 && (raw[pi] == Fail || raw[pi] == Skip):
				if skipped[i] == nil {
					skipped[i] = e.outcome(i, Result{Status: Skip, Message: "skipped: prerequisite " + c.Parent + " did not pass"})
				}
				o = skipped[i]
			case unknown[i] != nil:
				if host[i] == nil {
					host[i] = e.outcome(i, *unknown[i])
				}
				o = host[i]
			case c.Run != nil:
				if host[i] == nil {
					host[i] = e.outcome(i, c.Run(f))
				}
				o = host[i]
			case c.ReadsFor != nil && unknownFields(f, c.ReadsFor(p)) != nil:
				o = e.outcome(i, *unknownFields(f, c.ReadsFor(p)))
			case c.Key != nil:
				k := c.Key(p)
				if memo[i] == nil {
					memo[i] = map[platform.Spec]*Outcome{}
				}
				if o = memo[i][k]; o == nil {
					o = e.outcome(i, c.RunFor(f, p))
					memo[i][k] = o
				}
			default:
				o = e.outcome(i, c.RunFor(f, p))
			}
			raw[i] = o.Raw
			fd := Finding{Outcome: o, Severity: sev}
			fd.Status = effective(o.Raw, sev, opt, c.ID, &fd.Ignored)
			v.add(fd)
			v.Findings = append(v.Findings, fd)
		}
		v.conclude()
		out = append(out, v)
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
