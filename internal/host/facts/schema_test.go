package facts

import (
	"encoding/json"
	"testing"

	"github.com/invopop/jsonschema"

	"berth.dev/berth/internal/testkit/goldenfile"
)

// generateSchema reflects the JSON Schema of Facts from the Go types, with
// their doc comments as descriptions.
func generateSchema(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{
		// Fields are optional unless their tag says otherwise: absent
		// facts are left out, not null.
		RequiredFromJSONSchemaTags: true,
	}
	if err := r.AddGoComments("berth.dev/berth/internal/host/facts", "./"); err != nil {
		t.Fatalf("reading Go comments: %v", err)
	}
	s := r.Reflect(&Facts{})
	s.ID = "https://berth.dev/schemas/facts.schema.json"
	s.Title = "berth facts"
	return goldenfile.JSON(t, s)
}

// TestSchemaUpToDate checks that the committed and embedded schema is the one
// the Go types generate; run with -update after changing the types.
func TestSchemaUpToDate(t *testing.T) {
	goldenfile.AssertEmbedded(t, "facts.schema.json", generateSchema(t), Schema())
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
