package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"berth.dev/berth/internal/host/lazyre"
)

// OutputSchemaVersion is the version of the JSON an executable check
// prints. A check must say which version it speaks.
const OutputSchemaVersion = 1

// Statuses a plug-in finding may have.
var statuses = []string{"pass", "warn", "fail", "unknown"}

// Limits on what one executable check may report.
const (
	maxFindings = 256
	maxTitle    = 200
	maxText     = 4096
	maxFindID   = 128
)

// findingIDRE: lower-case dotted segments, at least two ("site.attestation.reachable").
var findingIDRE = lazyre.New(`^[a-z0-9]([a-z0-9_-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9_-]*[a-z0-9])?)+$`)

// Output is what an executable check prints on stdout: one JSON object,
// nothing else.
type Output struct {
	// SchemaVersion must be OutputSchemaVersion.
	SchemaVersion int `json:"schemaVersion"`
	// Facts are key/value facts merged into the plug-in features; keys
	// follow KeyRule.
	Facts map[string]string `json:"facts,omitempty"`
	// Findings are check results shown with berth's own.
	Findings []Finding `json:"findings,omitempty"`
}

// Finding is one check result of a plug-in.
type Finding struct {
	// ID is lower-case dotted segments, at least two, at most 128
	// characters: "site.attestation.reachable".
	ID string `json:"id"`
	// Status is pass, warn, fail or unknown.
	Status  string `json:"status"`
	Title   string `json:"title"`
	Message string `json:"message,omitempty"`
	Remedy  string `json:"remedy,omitempty"`
}

// ParseOutput decodes and validates a check's output. A malformed document
// is an error with the byte offset; the valid facts and findings of a
// well-formed document are returned together with an error listing the
// invalid ones, which are dropped.
func ParseOutput(data []byte) (Output, error) {
	var out Output
	if len(bytes.TrimSpace(data)) == 0 {
		return Output{}, errors.New("invalid output: empty, expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		off := dec.InputOffset()
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			off = se.Offset
		case errors.As(err, &te):
			off = te.Offset
		}
		return Output{}, fmt.Errorf("invalid JSON output at byte offset %d: %v", off, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Output{}, fmt.Errorf("invalid JSON output at byte offset %d: data after the object", dec.InputOffset())
	}
	if out.SchemaVersion != OutputSchemaVersion {
		return Output{}, fmt.Errorf("output schemaVersion %d not supported, expected %d", out.SchemaVersion, OutputSchemaVersion)
	}

	var errs []error
	valid := Output{SchemaVersion: out.SchemaVersion}
	for k, v := range sortedKeys(out.Facts) {
		err := ValidateKey(k)
		if err == nil {
			err = ValidateValue(v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("fact %q: %w", clip(k), err))
			continue
		}
		if valid.Facts == nil {
			valid.Facts = map[string]string{}
		}
		valid.Facts[k] = v
	}
	if len(out.Findings) > maxFindings {
		errs = append(errs, fmt.Errorf("%d findings, at most %d are read", len(out.Findings), maxFindings))
		out.Findings = out.Findings[:maxFindings]
	}
	seen := map[string]bool{}
	for i, f := range out.Findings {
		if err := validateFinding(f); err != nil {
			errs = append(errs, fmt.Errorf("finding %d: %w", i, err))
			continue
		}
		if seen[f.ID] {
			errs = append(errs, fmt.Errorf("finding %d: duplicate id %q", i, f.ID))
			continue
		}
		seen[f.ID] = true
		valid.Findings = append(valid.Findings, f)
	}
	return valid, errors.Join(errs...)
}

func validateFinding(f Finding) error {
	switch {
	case len(f.ID) > maxFindID || !findingIDRE.MatchString(f.ID):
		return fmt.Errorf("invalid id %q: expected lower-case dotted segments of a-z 0-9 - _, at least two, at most %d characters (site.attestation.reachable)", clip(f.ID), maxFindID)
	case !slices.Contains(statuses, f.Status):
		return fmt.Errorf("id %s: invalid status %q, expected one of %s", f.ID, clip(f.Status), strings.Join(statuses, ", "))
	case strings.TrimSpace(f.Title) == "":
		return fmt.Errorf("id %s: title is required", f.ID)
	case len(f.Title) > maxTitle:
		return fmt.Errorf("id %s: title longer than %d bytes", f.ID, maxTitle)
	case len(f.Message) > maxText || len(f.Remedy) > maxText:
		return fmt.Errorf("id %s: message or remedy longer than %d bytes", f.ID, maxText)
	}
	for _, s := range []string{f.Title, f.Message, f.Remedy} {
		if err := validateText(s); err != nil {
			return fmt.Errorf("id %s: %w", f.ID, err)
		}
	}
	return nil
}

// validateText refuses invalid UTF-8 and control characters other than
// newline and tab, which could rewrite a terminal.
func validateText(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("text is not valid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("text contains control character %U", r)
		}
	}
	return nil
}
