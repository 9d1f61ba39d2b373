package check

import (
	"fmt"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/facts"
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
// RunFor checks without a Key, or whose Key tells the twins apart (ByDebug,
// or a KeyFacts that does: the runtime handler check, whose handler name
// contains "debug"), and the children of a check whose result changed.
// Applies and ReadsFor must therefore not depend on Platform.Debug; the
// checks package tests that they do not.
//
// The verdicts share memory: an Outcome is shared by every finding with
// that result, and a debug twin whose findings all equal its base's
// shares the base's Findings slice. Callers must treat verdicts as
// read-only values (copy a Findings slice before changing it).
func (e *Evaluator) Evaluate(f *facts.Facts, ps []platform.Platform, opt Options) []Verdict {
	return e.EvaluatePlan(f, e.Plan(ps), opt)
}

// Plan is the part of an evaluation that depends on the platforms and the
// catalogue but not on the facts: which platforms are debug twins of
// another in the list, and the severity of each check on each of the
// others (or that it does not apply). For every valid platform that is
// about half of the evaluation's time, so a caller that knows the platforms
// before discovery ends (check --all, --platform) computes it meanwhile.
// A Plan is read-only once made and may be used by several evaluations.
type Plan struct {
	ps []platform.Platform
	// ids are the IDs of the checks the table covers: a prefix of the
	// catalogue of the evaluator that uses the plan (the static
	// catalogue, to which host plug-ins add checks after discovery).
	ids []string
	// twinOf[j] is the index of platform j's base when j is a debug twin
	// evaluated against it, else -1; row[j] is j's row in sev when it is
	// evaluated in full, else -1; full lists those platforms in order.
	twinOf, row []int32
	full        []int
	// sev holds one row of len(ids) severities per platform of full.
	sev []Severity
	// applicable counts the entries of sev that are not notApplicable.
	applicable int
}

// Platforms are the platforms planned for, in order.
func (pl *Plan) Platforms() []platform.Platform { return pl.ps }

// Plan computes the facts-independent part of evaluating ps (see Plan).
func (e *Evaluator) Plan(ps []platform.Platform) *Plan {
	n := len(e.checks)
	pl := &Plan{ps: ps, ids: make([]string, n)}
	for i := range e.checks {
		pl.ids[i] = e.checks[i].ID
	}
	// A debug twin is evaluated against its base, the same platform
	// without the debug variant, when that one is requested too; every
	// other platform is evaluated in full.
	base := make(map[platform.Spec]int32, len(ps)/2+1)
	for j, p := range ps {
		if !p.Debug() {
			base[p.Spec()] = int32(j)
		}
	}
	pl.twinOf = make([]int32, len(ps))
	pl.row = make([]int32, len(ps))
	for j, p := range ps {
		pl.twinOf[j], pl.row[j] = -1, -1
		if p.Debug() {
			sp := p.Spec()
			sp.Debug = false
			if b, ok := base[sp]; ok {
				pl.twinOf[j] = b
				continue
			}
		}
		pl.row[j] = int32(len(pl.full))
		pl.full = append(pl.full, j)
	}
	// Applicability first, so that the findings of every platform
	// evaluated in full fit one exactly sized array: hundreds of platforms
	// times dozens of checks would otherwise be hundreds of allocations
	// (or a far too large array) that dominate the evaluation.
	pl.sev = make([]Severity, len(pl.full)*n)
	pl.applicable = e.fillApplicability(pl, pl.sev, n, 0)
	return pl
}

// fillApplicability writes the severities of checks from..n-1 on the
// plan's full platforms into sev (rows of n) and returns how many apply.
func (e *Evaluator) fillApplicability(pl *Plan, sev []Severity, n, from int) int {
	total := 0
	for r, j := range pl.full {
		sr := sev[r*n : (r+1)*n]
		for i := from; i < n; i++ {
			sv := applies(&e.checks[i], pl.ps[j])
			if sv != notApplicable {
				total++
			}
			sr[i] = sv
		}
	}
	return total
}

// forEvaluator returns the plan's table widened to e's catalogue: the same
// when it covers all of it, else a copy with the severities of the checks
// the plan does not cover (plug-ins) added, or, when the plan's checks are
// not a prefix of e's, a new plan.
func (pl *Plan) forEvaluator(e *Evaluator) (sev []Severity, applicable int, fresh *Plan) {
	n, k := len(e.checks), len(pl.ids)
	if k > n {
		p := e.Plan(pl.ps)
		return p.sev, p.applicable, p
	}
	for i, id := range pl.ids {
		if e.checks[i].ID != id {
			p := e.Plan(pl.ps)
			return p.sev, p.applicable, p
		}
	}
	if k == n {
		return pl.sev, pl.applicable, pl
	}
	sev = make([]Severity, len(pl.full)*n)
	for r := range pl.full {
		copy(sev[r*n:r*n+k], pl.sev[r*k:(r+1)*k])
	}
	return sev, pl.applicable + e.fillApplicability(pl, sev, n, k), pl
}

// EvaluatePlan is Evaluate with the platforms' plan made beforehand (by
// this evaluator, or by one whose catalogue is a prefix of this one's).
func (e *Evaluator) EvaluatePlan(f *facts.Facts, pl *Plan, opt Options) []Verdict {
	s := e.newRun(f, opt)
	n := len(e.checks)
	sev, total, pl := pl.forEvaluator(e)
	ps, twinOf, row, full := pl.ps, pl.twinOf, pl.row, pl.full
	out := make([]Verdict, len(ps))
	all := make([]Finding, 0, total)

	// A debug twin can differ from its base only through the checks whose
	// result may depend on the debug variant (see below); their base
	// outcomes are kept, nil where the check does not apply, so that a
	// twin on which they all agree takes its base's findings at once.
	var sensitive []int
	for i := range e.checks {
		if c := &e.checks[i]; c.Run == nil && (c.Key == 0 || c.Key&ByDebug != 0) {
			sensitive = append(sensitive, i)
		}
	}
	ns := len(sensitive)
	sensOut := make([]*Outcome, len(full)*ns)

	// The platforms without the debug variant are evaluated first, then
	// the debug ones (in full when their base is not requested), so that
	// memoised results come from the same platforms whatever the order.
	evalFull := func(j int) {
		p := ps[j]
		sr := sev[int(row[j])*n : int(row[j]+1)*n]
		clear(s.raw)
		start := len(all)
		for i, sv := range sr {
			if sv == notApplicable {
				continue
			}
			all = append(all, s.finding(i, s.run(i, p), sv))
		}
		out[j] = verdict(p, all[start:len(all):len(all)])
		so := sensOut[int(row[j])*ns : int(row[j]+1)*ns]
		for si, i := range sensitive {
			if sr[i] != notApplicable {
				so[si] = outcomeOf(i, out[j].Findings, sr)
			}
		}
	}
	for _, j := range full {
		if !ps[j].Debug() {
			evalFull(j)
		}
	}
	// Twins whose findings differ from their base's get their own, in
	// extra; slices of it are handed out only once it stops growing.
	var extra []Finding
	type span struct{ j, start, end int }
	var spans []span
	for j, p := range ps {
		if !p.Debug() {
			continue
		}
		b := twinOf[j]
		if b < 0 {
			evalFull(j)
			continue
		}
		if s.sameAsBase(p, sensitive, sensOut[int(row[b])*ns:int(row[b]+1)*ns]) {
			v := out[b]
			v.Platform, v.Name = p.String(), p.Name()
			out[j] = v
			continue
		}
		bfs := out[b].Findings
		sr := sev[int(row[b])*n : int(row[b]+1)*n]
		clear(s.raw)
		clear(s.baseRaw)
		own, k := -1, 0
		for i, sv := range sr {
			if sv == notApplicable {
				continue
			}
			bf := bfs[k]
			c := &e.checks[i]
			// A host-wide result, or one keyed by dimensions that leave
			// out the debug variant, is the base's (given the same
			// parent result); a key that depends on the facts is
			// computed.
			same := c.Run != nil || (c.Key != 0 && c.Key&ByDebug == 0)
			if !same && c.KeyFacts != nil {
				same = s.memo[i].get(c.KeyFacts(f, p)) == bf.Outcome
			}
			if pi := e.parent[i]; pi >= 0 && s.raw[pi] != s.baseRaw[pi] {
				same = false
			}
			s.baseRaw[i] = bf.Raw
			fd := bf
			if same {
				s.raw[i] = bf.Raw
			} else {
				fd = s.finding(i, s.run(i, p), bf.Severity)
			}
			if own < 0 && fd != bf {
				own = len(extra)
				extra = append(extra, bfs[:k]...)
			}
			if own >= 0 {
				extra = append(extra, fd)
			}
			k++
		}
		if own < 0 {
			v := out[b]
			v.Platform, v.Name = p.String(), p.Name()
			out[j] = v
			continue
		}
		spans = append(spans, span{j, own, len(extra)})
	}
	for _, sp := range spans {
		out[sp.j] = verdict(ps[sp.j], extra[sp.start:sp.end:sp.end])
	}
	return out
}

// applies is c's severity on p, or notApplicable.
func applies(c *Check, p platform.Platform) Severity {
	sv, ok := c.Applies(p)
	if !ok {
		return notApplicable
	}
	return sv
}

// outcomeOf returns the outcome of check i among fs, the findings of a
// platform whose severities are sr.
func outcomeOf(i int, fs []Finding, sr []Severity) *Outcome {
	k := 0
	for _, sv := range sr[:i] {
		if sv != notApplicable {
			k++
		}
	}
	return fs[k].Outcome
}

// sameAsBase reports whether debug twin p certainly has its base's
// findings: every check of sensitive that applies (a base outcome in
// base) has a KeyFacts key under which p gets the base's outcome. The
// other checks then agree too, parent by parent. False is no verdict: the
// twin is then compared check by check.
func (s *run) sameAsBase(p platform.Platform, sensitive []int, base []*Outcome) bool {
	for si, i := range sensitive {
		bo := base[si]
		if bo == nil {
			continue
		}
		c := &s.e.checks[i]
		if c.KeyFacts == nil || s.memo[i].get(c.KeyFacts(s.f, p)) != bo {
			return false
		}
	}
	return true
}

// notApplicable marks a check that does not apply to a platform in the
// evaluation's table of severities.
const notApplicable Severity = 0xff

// run is the state of one Evaluate call: the results that platforms share.
type run struct {
	e   *Evaluator
	f   *facts.Facts
	opt Options
	// host[i] is the result of a host-wide check i (or of any check whose
	// declared evidence is unknown), computed once.
	host []*Outcome
	// unknown[i] is the Unknown result of check i when a fact it Reads is
	// unknown.
	unknown []*Result
	// skipped[i] is check i's result when its parent did not pass.
	skipped []*Outcome
	// memo[i] holds the results of RunFor check i by Key.
	memo []memo
	// reads[i] holds the results of ReadsFor check i's unknown evidence by
	// the fields ReadsFor returned.
	reads [][]readsEntry
	// ignored[i] is whether --ignore matches check i; nil when it is empty.
	ignored []bool
	// raw holds the raw results of the checks of the platform being
	// evaluated, so that a parent that failed or was skipped skips its
	// children; baseRaw those of a debug twin's base.
	raw, baseRaw []Status
	// slab backs the outcomes, a few allocations instead of one each.
	slab []Outcome
}

// memo is the memo of one RunFor check: a handful of keys at most, so a
// slice searched from the last hit beats a map.
type memo struct {
	keys []platform.Spec
	outs []*Outcome
	last int
}

// get returns the outcome memoised for k, or nil.
func (m *memo) get(k platform.Spec) *Outcome {
	if m.last < len(m.keys) && m.keys[m.last] == k {
		return m.outs[m.last]
	}
	for i := range m.keys {
		if m.keys[i] == k {
			m.last = i
			return m.outs[i]
		}
	}
	return nil
}

func (m *memo) put(k platform.Spec, o *Outcome) {
	m.last = len(m.keys)
	m.keys = append(m.keys, k)
	m.outs = append(m.outs, o)
}

// readsEntry is the unknown-evidence outcome for one list of fields that a
// ReadsFor check declared; o is nil when none of them is unknown.
type readsEntry struct {
	fields []string
	o      *Outcome
}

func (e *Evaluator) newRun(f *facts.Facts, opt Options) *run {
	n := len(e.checks)
	s := &run{e: e, f: f, opt: opt,
		host: make([]*Outcome, n), unknown: make([]*Result, n), skipped: make([]*Outcome, n),
		memo: make([]memo, n), reads: make([][]readsEntry, n),
		raw: make([]Status, n), baseRaw: make([]Status, n)}
	for i := range e.checks {
		s.unknown[i] = unknownEvidence(f, &e.checks[i])
	}
	if opt.Ignore.all || len(opt.Ignore.ids) > 0 {
		s.ignored = make([]bool, n)
		for i := range e.checks {
			s.ignored[i] = opt.Ignore.Matches(e.checks[i].ID)
		}
	}
	return s
}

// run evaluates check i on p; s.raw holds the results of p's checks so
// far, so that a failed or skipped parent skips its children.
func (s *run) run(i int, p platform.Platform) *Outcome {
	c := &s.e.checks[i]
	switch pi := s.e.parent[i]; {
	case pi >= 0 && (s.raw[pi] == Fail || s.raw[pi] == Skip):
		if s.skipped[i] == nil {
			s.skipped[i] = s.outcome(i, Result{Status: Skip, Message: "skipped: prerequisite " + c.Parent + " did not pass"})
		}
		return s.skipped[i]
	case s.unknown[i] != nil:
		if s.host[i] == nil {
			s.host[i] = s.outcome(i, *s.unknown[i])
		}
		return s.host[i]
	case c.Run != nil:
		if s.host[i] == nil {
			s.host[i] = s.outcome(i, c.Run(s.f))
		}
		return s.host[i]
	}
	if c.ReadsFor != nil && len(s.f.Unknown) > 0 {
		if o := s.readsUnknown(i, c.ReadsFor(p)); o != nil {
			return o
		}
	}
	k, keyed := c.key(s.f, p)
	if !keyed {
		return s.outcome(i, c.RunFor(s.f, p))
	}
	m := &s.memo[i]
	o := m.get(k)
	if o == nil {
		o = s.outcome(i, c.RunFor(s.f, p))
		m.put(k, o)
	}
	return o
}

// readsUnknown returns the Unknown outcome of check i when one of fields
// (what its ReadsFor returned for a platform) is unknown, or nil. Checks
// return the same few lists for every platform, so the answer is memoised
// by list.
func (s *run) readsUnknown(i int, fields []string) *Outcome {
	for _, r := range s.reads[i] {
		if slices.Equal(r.fields, fields) {
			return r.o
		}
	}
	var o *Outcome
	if r := unknownFields(s.f, fields); r != nil {
		o = s.outcome(i, *r)
	}
	s.reads[i] = append(s.reads[i], readsEntry{fields: fields, o: o})
	return o
}

// finding is check i's finding on a platform where its severity is sev,
// and records its raw result for the check's children.
func (s *run) finding(i int, o *Outcome, sev Severity) Finding {
	fd := Finding{Outcome: o, Severity: sev}
	fd.Status = effective(o.Raw, sev, s.opt.Strict, s.ignored != nil && s.ignored[i], &fd.Ignored)
	s.raw[i] = o.Raw
	return fd
}

func (s *run) outcome(i int, r Result) *Outcome {
	if len(s.slab) == cap(s.slab) {
		s.slab = make([]Outcome, 0, max(16, len(s.e.checks)))
	}
	c := &s.e.checks[i]
	s.slab = append(s.slab, Outcome{ID: c.ID, Title: c.Title, Parent: c.Parent, Depth: s.e.depth[i],
		Raw: r.Status, Message: r.Message, Evidence: r.Evidence, Remedy: r.Remedy})
	return &s.slab[len(s.slab)-1]
}

// verdict concludes p's verdict from its findings.
func verdict(p platform.Platform, fs []Finding) Verdict {
	v := Verdict{Platform: p.String(), Name: p.Name(), Findings: fs}
	for i := range fs {
		v.add(&fs[i])
	}
	v.conclude()
	return v
}

// effective maps a raw status to what it means on a platform.
func effective(s Status, sev Severity, strict, ignore bool, ignored *bool) Status {
	if s == Fail && sev == Warning {
		s = Warn
	}
	if s == Fail && ignore {
		*ignored = true
		return Warn
	}
	if strict && !*ignored && (s == Warn || s == Unknown) {
		return Fail
	}
	return s
}

func (v *Verdict) add(fd *Finding) {
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
		if len(m.Field) > len(field) && m.Field[len(field)] == '.' && strings.HasPrefix(m.Field, field) {
			return m.Field + ": " + m.Reason, true
		}
	}
	return "", false
}
