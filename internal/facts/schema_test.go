package facts

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/invopop/jsonschema"
)

var update = flag.Bool("update", false, "rewrite golden files")

// generateSchema reflects the JSON Schema of Facts from the Go types, with
// their doc comments as descriptions.
func generateSchema(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{
		// Fields are optional unless their tag says otherwise: absent
		// facts are left out, not null.
		RequiredFromJSONSchemaTags: true,
	}
	if err := r.AddGoComments("berth.dev/berth/internal/facts", "./"); err != nil {
		t.Fatalf("reading Go comments: %v", err)
	}
	s := r.Reflect(&Facts{})
	s.ID = "https://berth.dev/schemas/facts.schema.json"
	s.Title = "berth facts"
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestSchemaUpToDate(t *testing.T) {
	got := generateSchema(t)
	if *update {
		if err := os.WriteFile("facts.schema.json", got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("facts.schema.json")
	if err != nil {
		t.Fatalf("%v (run go test ./internal/facts -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("facts.schema.json is out of date with the Go types: run go test ./internal/facts -update")
	}
	if Schema() != string(want) {
		t.Fatalf("embedded schema differs from facts.schema.json: rebuild")
	}
}

func TestSchemaDescribesFields(t *testing.T) {
	var s struct {
		Defs map[string]struct {
			Properties map[string]struct {
				Description string `json:"description"`
			} `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal([]byte(Schema()), &s); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	for _, c := range []struct{ def, prop string }{
		{"Facts", "unknown"}, {"CPU", "productLine"}, {"Virt", "acpiOemId"},
	} {
		p, ok := s.Defs[c.def].Properties[c.prop]
		if !ok {
			t.Errorf("schema lacks %s.%s", c.def, c.prop)
			continue
		}
		if p.Description == "" {
			t.Errorf("schema %s.%s has no description (Go comments not picked up)", c.def, c.prop)
		}
	}
}
