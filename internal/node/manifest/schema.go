package manifest

import _ "embed"

// schemaJSON is the JSON Schema of a manifest, generated from the Go types
// by `go test ./internal/node/manifest -update` (a test fails when it drifts).
//
//go:embed manifest.schema.json
var schemaJSON string

// Schema returns the JSON Schema of the manifest format.
func Schema() string { return schemaJSON }
