package facts

import _ "embed"

// schemaJSON is the JSON Schema of Facts, generated from the Go types by
// `go test ./internal/host/facts -update` (a test fails when it drifts).
//
//go:embed facts.schema.json
var schemaJSON string

// Schema returns the JSON Schema of the Facts document.
func Schema() string { return schemaJSON }
