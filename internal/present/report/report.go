// Package report turns verdicts into what `berth check` prints: the
// platform matrix and the detailed check tree as text in the spirit of
// virt-host-validate, a versioned JSON/YAML document (schema checked in as
// report.schema.json), and a Node Feature Discovery feature file.
package report

import (
	"time"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

// SchemaVersion is bumped on every incompatible change to the report's
// JSON. 2: findings are listed once and verdicts refer to them by index
// (wire.go).
const SchemaVersion = 2

// Kind identifies the document.
const Kind = "berth.dev/CheckReport"

// Report is the machine-readable result of `berth check`. In memory each
// verdict holds its findings; JSON and YAML write each finding once
// (MarshalJSON).
type Report struct {
	Header
	// Verdicts hold every evaluated platform with all of its findings.
	Verdicts []check.Verdict `json:"verdicts"`
}

// Header is what a report says besides its verdicts, the same in memory
// and on the wire.
type Header struct {
	Kind          string `json:"kind"`
	SchemaVersion int    `json:"schemaVersion"`
	// Mode is "matrix" (no --platform) or "detail".
	Mode string `json:"mode" jsonschema:"enum=matrix,enum=detail"`
	Host Host   `json:"host"`
	// FactsDigest is "sha256:<hex>" of the canonical facts JSON (encoding/json
	// of facts.Facts: struct field order, sorted map keys).
	FactsDigest string  `json:"factsDigest" jsonschema:"pattern=^sha256:[0-9a-f]{64}$"`
	Options     Opts    `json:"options"`
	Summary     Summary `json:"summary"`
}

// Host identifies the inspected host.
type Host struct {
	Root         string    `json:"root"`
	Live         bool      `json:"live"`
	CollectedAt  time.Time `json:"collectedAt"`
	Distribution string    `json:"distribution,omitempty"`
	CPU          string    `json:"cpu,omitempty"`
	Guest        *bool     `json:"guest,omitempty"`
	Hypervisor   string    `json:"hypervisor,omitempty"`
	Kernel       string    `json:"kernel,omitempty"`
}

// Opts records how the check was run.
type Opts struct {
	Platforms []string `json:"platforms,omitempty"`
	All       bool     `json:"all,omitempty"`
	Ignore    string   `json:"ignore,omitempty"`
	Strict    bool     `json:"strict,omitempty"`
	Probe     bool     `json:"probe"`
}

// Summary counts the verdicts.
type Summary struct {
	Ready             int `json:"ready"`
	ReadyWithWarnings int `json:"readyWithWarnings"`
	NotReady          int `json:"notReady"`
}

// New builds a report.
func New(f *facts.Facts, mode string, vs []check.Verdict, opts Opts) (*Report, error) {
	d, err := f.Digest()
	if err != nil {
		return nil, err
	}
	return NewDigested(f, d, mode, vs, opts), nil
}

// NewDigested builds a report of facts whose Facts.Digest is digest, computed
// by the caller (beside the evaluation, see preflight.Options.Digest).
func NewDigested(f *facts.Facts, digest, mode string, vs []check.Verdict, opts Opts) *Report {
	r := &Report{Verdicts: vs, Header: Header{Kind: Kind, SchemaVersion: SchemaVersion, Mode: mode, FactsDigest: digest, Options: opts,
		Host: Host{
			Root: f.Root, Live: f.Live, CollectedAt: f.CollectedAt, Distribution: f.Distribution.Name,
			CPU: cpuSummary(f), Guest: f.Virt.Guest, Hypervisor: f.Virt.Hypervisor, Kernel: f.Kernel.Release,
		}}}
	if r.Verdicts == nil {
		r.Verdicts = []check.Verdict{}
	}
	for _, v := range vs {
		switch v.Status {
		case check.Ready:
			r.Summary.Ready++
		case check.ReadyWithWarnings:
			r.Summary.ReadyWithWarnings++
		default:
			r.Summary.NotReady++
		}
	}
	return r
}

// AllReady reports whether every verdict allows running the platform.
func (r *Report) AllReady() bool { return r.Summary.NotReady == 0 }

func cpuSummary(f *facts.Facts) string {
	s := f.CPU.ModelName
	if s == "" {
		s = f.CPU.VendorID
	}
	if f.CPU.ProductLine != "" {
		s += " (" + f.CPU.ProductLine + ")"
	}
	return s
}
