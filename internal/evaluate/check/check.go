// Package check is the preflight framework: the Check type (a small pure
// function over facts.Facts with a stable dotted ID, a title, why it
// matters, the platforms it applies to and its severity there, the fact
// fields it reads and a remedy), the evaluator that runs a catalogue of
// checks as a tree against one or more platforms, and the verdicts.
//
// Checks never touch files: everything they know comes from Facts. The
// evaluator, not each check, enforces that a check whose declared evidence
// is unknown never passes.
package check

import (
	"fmt"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

// Status is the result of one check. It is a small integer, not a string,
// because an evaluation of every platform holds tens of thousands of
// findings; it marshals as its name ("pass", "warn", ...).
type Status uint8

// The results a finding can have. The order of severity for display is
// fail, warn, unknown, skip, pass. The zero Status means "not evaluated".
const (
	// Pass: the requirement is met.
	Pass Status = iota + 1
	// Warn: not blocking, but worth a look (or a failure demoted by the
	// check's severity on this platform or by --ignore).
	Warn
	// Fail: the platform cannot run here until this is fixed.
	Fail
	// Skip: a prerequisite failed, so the check was not evaluated.
	Skip
	// Unknown: the evidence is missing (offline root, unreadable file):
	// never a pass.
	Unknown
)

// String returns the status name used in every output format.
func (s Status) String() string {
	switch s {
	case Pass:
		return "pass"
	case Warn:
		return "warn"
	case Fail:
		return "fail"
	case Skip:
		return "skip"
	case Unknown:
		return "unknown"
	}
	return ""
}

// ParseStatus returns the Status named s (case-insensitive).
func ParseStatus(s string) (Status, bool) {
	for st := Pass; st <= Unknown; st++ {
		if strings.EqualFold(s, st.String()) {
			return st, true
		}
	}
	return 0, false
}

// MarshalText encodes the status name.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes a status name.
func (s *Status) UnmarshalText(b []byte) error {
	st, ok := ParseStatus(string(b))
	if !ok {
		return fmt.Errorf("unknown check status %q: expected pass, warn, fail, skip or unknown", b)
	}
	*s = st
	return nil
}

// Severity is how much a failed check matters on a platform.
type Severity uint8

// Severities. A check that fails with severity Warning is reported as a
// warning on that platform.
const (
	Blocking Severity = iota + 1
	Warning
)

// String returns "fail" for Blocking and "warn" for Warning, the words the
// reports use.
func (s Severity) String() string {
	switch s {
	case Blocking:
		return "fail"
	case Warning:
		return "warn"
	}
	return ""
}

// MarshalText encodes the severity name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes a severity name.
func (s *Severity) UnmarshalText(b []byte) error {
	switch string(b) {
	case "fail":
		*s = Blocking
	case "warn":
		*s = Warning
	default:
		return fmt.Errorf("unknown severity %q: expected fail or warn", b)
	}
	return nil
}

// Evidence is one fact a check read and the value it had.
type Evidence struct {
	// Field is the dotted JSON path in Facts, e.g. "devices.kvm.createVm".
	Field string `json:"field"`
	// Value is the value read, rendered for humans; for an unknown fact it
	// is "unknown (<reason>)".
	Value string `json:"value"`
}

// Result is what a check function returns. Status is Pass when the
// requirement is met, Fail when it is not (the evaluator turns that into a
// warning where the check's severity on the platform is Warning), Warn for
// an advisory that never blocks, Unknown when the check itself cannot tell.
type Result struct {
	Status   Status
	Message  string
	Evidence []Evidence
	Remedy   string
}

// Ok returns a passing result.
func Ok(msg string, ev ...Evidence) Result { return Result{Status: Pass, Message: msg, Evidence: ev} }

// Failed returns a failing result with a remedy.
func Failed(msg, remedy string, ev ...Evidence) Result {
	return Result{Status: Fail, Message: msg, Remedy: remedy, Evidence: ev}
}

// Warned returns an advisory result with a remedy.
func Warned(msg, remedy string, ev ...Evidence) Result {
	return Result{Status: Warn, Message: msg, Remedy: remedy, Evidence: ev}
}

// Unsure returns an unknown result.
func Unsure(msg string, ev ...Evidence) Result {
	return Result{Status: Unknown, Message: msg, Evidence: ev}
}

// Ev builds one piece of evidence, formatting the value with %v.
func Ev(field string, value any) Evidence {
	switch v := value.(type) {
	case string:
		if v == "" {
			v = `""`
		}
		return Evidence{Field: field, Value: v}
	case *bool:
		if v == nil {
			return Evidence{Field: field, Value: "not reported"}
		}
		return Evidence{Field: field, Value: strconv.FormatBool(*v)}
	case *int:
		if v == nil {
			return Evidence{Field: field, Value: "not reported"}
		}
		return Evidence{Field: field, Value: strconv.Itoa(*v)}
	case []string:
		return Evidence{Field: field, Value: "[" + strings.Join(v, " ") + "]"}
	// The common kinds without fmt, which is a tenth of an evaluation
	// (checks run for every platform): what fmt.Sprint prints for them.
	case bool:
		return Evidence{Field: field, Value: strconv.FormatBool(v)}
	case int:
		return Evidence{Field: field, Value: strconv.Itoa(v)}
	case int64:
		return Evidence{Field: field, Value: strconv.FormatInt(v, 10)}
	case uint64:
		return Evidence{Field: field, Value: strconv.FormatUint(v, 10)}
	}
	return Evidence{Field: field, Value: fmt.Sprint(value)}
}

// Check is one entry of the catalogue.
type Check struct {
	// ID is stable and dotted: area.subject.property, e.g.
	// "kvm.device.usable". Users pass it to --ignore and explain.
	ID string
	// Title completes "Checking ..." in the table, e.g. "for hardware
	// virtualization".
	Title string
	// Why says in one or two sentences why the check matters.
	Why string
	// Parent is the ID of the check this one depends on: when the parent
	// fails (or was skipped) this one is skipped, as in snphost.
	Parent string
	// Reads declares the fact fields the check reads, as dotted JSON paths.
	// If any is unknown in Facts.Unknown the result is Unknown.
	Reads []string
	// ReadsFor adds the fields read on a given platform (the platform's
	// hypervisor binary, its runtime's handlers), for RunFor checks.
	ReadsFor func(p platform.Platform) []string
	// Platforms describes for humans which platforms the check applies to.
	Platforms string
	// Remedies lists what a person can do when the check fails, for
	// `berth check explain`.
	Remedies []string
	// Applies returns the check's severity on p, and false when the check
	// does not apply to p.
	Applies func(p platform.Platform) (Severity, bool)
	// Run evaluates a check whose result does not depend on the platform;
	// the evaluator runs it once per host. Exactly one of Run and RunFor
	// is set.
	Run func(f *facts.Facts) Result
	// RunFor evaluates a check whose result depends on the platform (its
	// hypervisor, memory overhead, handler name ...).
	RunFor func(f *facts.Facts, p platform.Platform) Result
	// Key, for a RunFor check, names the platform dimensions the result
	// depends on, so that the evaluator runs the check once per distinct
	// combination of them rather than once per platform; zero means the
	// result may depend on anything (the check runs for every platform).
	// A declaration rather than a function, so that the evaluator knows
	// without calling anything that, say, a debug twin shares its base's
	// result.
	Key Dims
	// KeyFacts is Key for checks whose grouping depends on the facts too:
	// the runtime-handler check gives one result to every platform whose
	// handler is absent, and its own to each platform that has one. At
	// most one of Key and KeyFacts is set.
	KeyFacts func(f *facts.Facts, p platform.Platform) platform.Spec
}

// Dims is a set of platform dimensions (Check.Key).
type Dims uint8

// The dimensions of a platform.Spec.
const (
	ByDistribution Dims = 1 << iota
	ByHypervisor
	ByTEE
	ByProductLine
	BySnapshotter
	// ByGPU is the image variant: the GPU image or NVIDIA's CPU-only one.
	ByGPU
	ByDebug
	ByKataRuntime
)

// Of returns s with only the dimensions in d set: the memo key of a check
// whose Key is d.
func (d Dims) Of(s platform.Spec) platform.Spec {
	var k platform.Spec
	if d&ByDistribution != 0 {
		k.Distribution = s.Distribution
	}
	if d&ByHypervisor != 0 {
		k.Hypervisor = s.Hypervisor
	}
	if d&ByTEE != 0 {
		k.TEE = s.TEE
	}
	if d&ByProductLine != 0 {
		k.ProductLine = s.ProductLine
	}
	if d&BySnapshotter != 0 {
		k.Snapshotter = s.Snapshotter
	}
	k.GPU = d&ByGPU != 0 && s.GPU
	k.NvidiaCPU = d&ByGPU != 0 && s.NvidiaCPU
	k.Debug = d&ByDebug != 0 && s.Debug
	if d&ByKataRuntime != 0 {
		k.KataRuntime = s.KataRuntime
	}
	return k
}

// key returns the memo key of a RunFor check on p, and whether it has one.
func (c *Check) key(f *facts.Facts, p platform.Platform) (platform.Spec, bool) {
	switch {
	case c.Key != 0:
		return c.Key.Of(p.Spec()), true
	case c.KeyFacts != nil:
		return c.KeyFacts(f, p), true
	}
	return platform.Spec{}, false
}

// Validate reports a malformed catalogue entry; the catalogue test calls
// it for every check.
func (c *Check) Validate() error {
	switch {
	case c.ID == "" || strings.ToLower(c.ID) != c.ID || !strings.Contains(c.ID, "."):
		return fmt.Errorf("check %q: ID must be lower-case and dotted", c.ID)
	case c.Title == "":
		return fmt.Errorf("check %s: no title", c.ID)
	case c.Why == "":
		return fmt.Errorf("check %s: no why", c.ID)
	case c.Applies == nil:
		return fmt.Errorf("check %s: no Applies predicate", c.ID)
	case (c.Run == nil) == (c.RunFor == nil):
		return fmt.Errorf("check %s: exactly one of Run and RunFor must be set", c.ID)
	case c.Key != 0 && c.KeyFacts != nil:
		return fmt.Errorf("check %s: at most one of Key and KeyFacts may be set", c.ID)
	case len(c.Remedies) == 0:
		return fmt.Errorf("check %s: no remedies", c.ID)
	case c.Platforms == "":
		return fmt.Errorf("check %s: no description of the platforms it applies to", c.ID)
	}
	return nil
}

// Always applies a check to every platform with severity s.
func Always(s Severity) func(platform.Platform) (Severity, bool) {
	return func(platform.Platform) (Severity, bool) { return s, true }
}

// When applies a check with severity s to the platforms for which pred
// holds.
func When(s Severity, pred func(platform.Platform) bool) func(platform.Platform) (Severity, bool) {
	return func(p platform.Platform) (Severity, bool) { return s, pred(p) }
}
