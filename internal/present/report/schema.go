package report

import _ "embed"

// schemaJSON is the JSON Schema of Report, generated from the Go types by
// `go test ./internal/present/report -update` (a test fails when it drifts).
//
//go:embed report.schema.json
var schemaJSON string

// Schema returns the JSON Schema of the check report.
func Schema() string { return schemaJSON }
