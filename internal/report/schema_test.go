package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/invopop/jsonschema"
)

var update = flag.Bool("update", false, "rewrite golden files")

func generateSchema(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{}
	for pkg, dir := range map[string]string{"berth.dev/berth/internal/report": "./", "berth.dev/berth/internal/check": "../check"} {
		if err := r.AddGoComments(pkg, dir); err != nil {
			t.Fatalf("reading Go comments of %s: %v", pkg, err)
		}
	}
	s := r.Reflect(&Report{})
	s.ID = "https://berth.dev/schemas/check-report.schema.json"
	s.Title = "berth check report"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestSchemaUpToDate(t *testing.T) {
	got := generateSchema(t)
	if *update {
		if err := os.WriteFile("report.schema.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("report.schema.json")
	if err != nil {
		t.Fatalf("%v (run go test ./internal/report -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("report.schema.json is out of date with the Go types: run go test ./internal/report -update")
	}
	if Schema() != string(want) {
		t.Fatal("embedded schema differs from report.schema.json: rebuild")
	}
}
