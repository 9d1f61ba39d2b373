package manifest

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/invopop/jsonschema"

	"berth.dev/berth/internal/testkit/goldenfile"
)

// generateSchema reflects the manifest types. The Go types hold the parsed
// form; the mapper widens the fields the parser accepts in more than one
// spelling (a digest in three forms, a dimension as a value or a list).
func generateSchema(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{
		RequiredFromJSONSchemaTags: false,
		Mapper: func(rt reflect.Type) *jsonschema.Schema {
			if rt == reflect.TypeFor[Role]() {
				s := &jsonschema.Schema{Type: "string"}
				for _, r := range Roles() {
					s.Enum = append(s.Enum, string(r))
				}
				return s
			}
			return nil
		},
	}
	if err := r.AddGoComments("berth.dev/berth/internal/node/manifest", "./"); err != nil {
		t.Fatalf("reading Go comments: %v", err)
	}
	s := r.Reflect(&Manifest{})
	s.ID = "https://berth.dev/schemas/manifest-v1.schema.json"
	s.Title = "berth component manifest (" + APIVersion + ")"
	defs := s.Definitions
	defs["Manifest"].Properties.Value("apiVersion").Const = APIVersion
	comp := defs["Component"]
	comp.Properties.Value("sha256").Pattern = `^([0-9a-fA-F]{64}|sha256:[0-9a-fA-F]{64}|sha256-[A-Za-z0-9+/]{43}=)$`
	comp.Properties.Value("size").Minimum = json.Number("1")
	comp.Properties.Value("size").Maximum = json.Number(strconv.Itoa(MaxComponentSize))
	comp.Properties.Value("path").Pattern = `^[^/]`
	comp.Properties.Value("mode").Pattern = `^0[0-7]{3}$`
	comp.Required = []string{"name", "version", "sources", "sha256", "size"}
	comp.OneOf = []*jsonschema.Schema{{Required: []string{"path", "mode"}}, {Required: []string{"archive"}}}
	defs["Member"].Properties.Value("mode").Pattern = `^0[0-7]{3}$`
	defs["Archive"].Properties.Value("type").Enum = []any{"tar", "tar.gz", "tar.zst"}
	defs["Measured"].Required = []string{"kernelCmdline"}
	sel := defs["Selector"]
	for pair := sel.Properties.Oldest(); pair != nil; pair = pair.Next() {
		if pair.Value.Type == "array" {
			item := pair.Value.Items
			pair.Value.Type, pair.Value.Items = "", nil
			pair.Value.OneOf = []*jsonschema.Schema{{Type: "string"}, {Type: "array", Items: item, MinItems: ptr(uint64(1))}}
		}
	}
	return goldenfile.JSON(t, s)
}

func ptr[T any](v T) *T { return &v }

// TestSchemaUpToDate checks that the committed and embedded schema is the one
// the Go types generate; run with -update after changing the types.
func TestSchemaUpToDate(t *testing.T) {
	goldenfile.AssertEmbedded(t, "manifest.schema.json", generateSchema(t), Schema())
}
