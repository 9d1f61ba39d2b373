package report

import (
	"testing"

	"github.com/invopop/jsonschema"

	"berth.dev/berth/internal/testkit/goldenfile"
)

func generateSchema(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{}
	for pkg, dir := range map[string]string{"berth.dev/berth/internal/present/report": "./", "berth.dev/berth/internal/evaluate/check": "../../evaluate/check"} {
		if err := r.AddGoComments(pkg, dir); err != nil {
			t.Fatalf("reading Go comments of %s: %v", pkg, err)
		}
	}
	s := r.Reflect(&wireReport{})
	s.ID = "https://berth.dev/schemas/check-report.schema.json"
	s.Title = "berth check report"
	return goldenfile.JSON(t, s)
}

// TestSchemaUpToDate checks that the committed and embedded schema is the one
// the Go types generate; run with -update after changing the types.
func TestSchemaUpToDate(t *testing.T) {
	goldenfile.AssertEmbedded(t, "report.schema.json", generateSchema(t), Schema())
}
