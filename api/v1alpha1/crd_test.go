package v1alpha1

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"berth.dev/berth/internal/testkit/goldenfile"
)

// crdPath is the CRD manifest generated from the Go types by this test.
var crdPath = filepath.Join("..", "..", "deploy", "base", "crd-nodereport.yaml")

// fieldRule refines the schema of one field, named Type.Field, beyond what
// its Go type says.
type fieldRule struct {
	maxLength *int64
	pattern   string
	maxItems  *int64
	listType  string // "atomic" unless set
	listKeys  []string
	mapType   string // x-kubernetes-map-type of a struct, if set
}

func i64(n int) *int64 { v := int64(n); return &v }

// rules holds every refinement. Strings not listed get MaxNameLen, slices
// not listed fail generation: each list must be capped on purpose.
func rules() map[string]fieldRule {
	return map[string]fieldRule{
		"Report.NodeName":    {maxLength: i64(253)},
		"Report.ContentHash": {pattern: `^sha256:[0-9a-f]{64}$`, maxLength: i64(71)},
		// The agent owns the whole report and applies it whole: as one atomic
		// value its managedFields entry is one line instead of a field per
		// platform, which halves the size of a NodeReport list (berth fleet
		// over 5,000 nodes).
		"NodeReport.Report":       {mapType: "atomic"},
		"Report.Platforms":        {maxItems: i64(MaxPlatforms), listType: "map", listKeys: []string{"name"}},
		"Report.Findings":         {maxItems: i64(MaxFindings)},
		"FactsSummary.GPUs":       {maxItems: i64(MaxGPUs)},
		"Report.GPUResources":     {maxItems: i64(MaxGPUResources), listType: "map", listKeys: []string{"name"}},
		"GPUResource.Name":        {maxLength: i64(MaxGPUResourceName)},
		"Finding.Message":         {maxLength: i64(MaxTextLen)},
		"Finding.Remedy":          {maxLength: i64(MaxTextLen)},
		"FactsSummary.OS":         {maxLength: i64(MaxTextLen)},
		"PlatformVerdict.Name":    {maxLength: i64(63)},
		"CPUSummary.Model":        {maxLength: i64(MaxTextLen)},
		"InstallStatus.Digest":    {maxLength: i64(71)},
		"InstallStatus.Platforms": {maxItems: i64(MaxInstallPlatforms), listType: "map", listKeys: []string{"name"}},
		"PlatformInstall.Name":    {maxLength: i64(63)},
		"PlatformInstall.Error":   {maxLength: i64(MaxTextLen)},
		// One per type, merged by type as kubectl and client tools
		// expect of conditions.
		"NodeReportStatus.Conditions": {maxItems: i64(MaxConditions), listType: "map", listKeys: []string{"type"}},
	}
}

// enums lists the values of the string types that are closed sets.
func enums() map[reflect.Type][]string {
	return map[reflect.Type][]string{
		reflect.TypeFor[Verdict]():       {string(VerdictReady), string(VerdictWarn), string(VerdictNotReady)},
		reflect.TypeFor[FindingStatus](): {string(FindingFail), string(FindingWarn)},
		reflect.TypeFor[InstallState]():  {string(InstallInstalled), string(InstallNotReady), string(InstallFailed)},
	}
}

// docs returns the doc comments of the package's types and fields, keyed
// "Type" and "Type.Field", parsed from the source so the CRD's descriptions
// (kubectl explain) are the Go documentation.
func docs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "types.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	p, err := doc.NewFromFiles(fset, []*ast.File{f}, "berth.dev/berth/api/v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	clean := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	for _, typ := range p.Types {
		out[typ.Name] = clean(typ.Doc)
		for _, spec := range typ.Decl.Specs {
			st, ok := spec.(*ast.TypeSpec).Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, fl := range st.Fields.List {
				for _, n := range fl.Names {
					out[typ.Name+"."+n.Name] = clean(fl.Doc.Text())
				}
			}
		}
	}
	return out
}

type generator struct {
	t     *testing.T
	docs  map[string]string
	rules map[string]fieldRule
	enums map[reflect.Type][]string
	used  map[string]bool
}

func (g *generator) schema(typ reflect.Type, key string) apiextv1.JSONSchemaProps {
	r := g.rules[key]
	if _, ok := g.rules[key]; ok {
		g.used[key] = true
	}
	if typ == reflect.TypeFor[metav1.Time]() {
		return apiextv1.JSONSchemaProps{Type: "string", Format: "date-time"}
	}
	if typ == reflect.TypeFor[metav1.Condition]() {
		return conditionSchema()
	}
	switch typ.Kind() {
	case reflect.Pointer:
		return g.schema(typ.Elem(), key)
	case reflect.String:
		s := apiextv1.JSONSchemaProps{Type: "string", Pattern: r.pattern}
		for _, v := range g.enums[typ] {
			s.Enum = append(s.Enum, apiextv1.JSON{Raw: []byte(fmt.Sprintf("%q", v))})
		}
		if s.Enum == nil {
			s.MaxLength = r.maxLength
			if s.MaxLength == nil {
				s.MaxLength = i64(MaxNameLen)
			}
		}
		return s
	case reflect.Bool:
		return apiextv1.JSONSchemaProps{Type: "boolean"}
	case reflect.Int32:
		zero := 0.0
		return apiextv1.JSONSchemaProps{Type: "integer", Format: "int32", Minimum: &zero}
	case reflect.Slice:
		if r.maxItems == nil {
			g.t.Fatalf("%s: every list needs a maxItems rule", key)
		}
		items := g.schema(typ.Elem(), typ.Elem().Name())
		s := apiextv1.JSONSchemaProps{
			Type:     "array",
			MaxItems: r.maxItems,
			Items:    &apiextv1.JSONSchemaPropsOrArray{Schema: &items},
		}
		lt := r.listType
		if lt == "" {
			lt = "atomic"
		}
		s.XListType = &lt
		s.XListMapKeys = r.listKeys
		return s
	case reflect.Struct:
		s := g.object(typ)
		if r.mapType != "" {
			s.XMapType = &r.mapType
		}
		return s
	}
	g.t.Fatalf("%s: no schema for Go kind %s", key, typ.Kind())
	return apiextv1.JSONSchemaProps{}
}

func (g *generator) object(typ reflect.Type) apiextv1.JSONSchemaProps {
	s := apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{}}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			g.t.Fatalf("%s.%s: missing json name", typ.Name(), f.Name)
		}
		key := typ.Name() + "." + f.Name
		p := g.schema(f.Type, key)
		p.Description = g.docs[key]
		if p.Description == "" {
			g.t.Errorf("%s has no doc comment", key)
		}
		s.Properties[name] = p
		if !strings.Contains(opts, "omitempty") {
			s.Required = append(s.Required, name)
		}
	}
	return s
}

// conditionSchema is the schema Kubernetes' own CRDs give
// metav1.Condition (its validation tags: the limits of
// metav1.Condition's fields).
func conditionSchema() apiextv1.JSONSchemaProps {
	zero := 0.0
	return apiextv1.JSONSchemaProps{
		Type:        "object",
		Description: "Condition contains details for one aspect of the current state of this API Resource.",
		Required:    []string{"lastTransitionTime", "message", "reason", "status", "type"},
		Properties: map[string]apiextv1.JSONSchemaProps{
			"type": {Type: "string", MaxLength: i64(316), Pattern: `^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`,
				Description: "type of condition in CamelCase or in foo.example.com/CamelCase."},
			"status": {Type: "string", Enum: []apiextv1.JSON{{Raw: []byte(`"True"`)}, {Raw: []byte(`"False"`)}, {Raw: []byte(`"Unknown"`)}},
				Description: "status of the condition, one of True, False, Unknown."},
			"reason": {Type: "string", MinLength: i64(1), MaxLength: i64(1024), Pattern: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`,
				Description: "reason contains a programmatic identifier indicating the reason for the condition's last transition."},
			"message":            {Type: "string", MaxLength: i64(32768), Description: "message is a human readable message indicating details about the transition."},
			"lastTransitionTime": {Type: "string", Format: "date-time", Description: "lastTransitionTime is the last time the condition transitioned from one status to another."},
			"observedGeneration": {Type: "integer", Format: "int64", Minimum: &zero, Description: "observedGeneration represents the .metadata.generation that the condition was set based upon."},
		},
	}
}

// generateCRD builds the NodeReport CRD from the Go types.
func generateCRD(t *testing.T) []byte {
	g := &generator{t: t, docs: docs(t), rules: rules(), enums: enums(), used: map[string]bool{}}
	report := g.schema(reflect.TypeFor[Report](), "NodeReport.Report")
	report.Description = g.docs["NodeReport.Report"]
	status := g.schema(reflect.TypeFor[NodeReportStatus](), "NodeReport.Status")
	status.Description = g.docs["NodeReport.Status"]
	for k := range g.rules {
		if !g.used[k] {
			t.Errorf("rule %s matches no field", k)
		}
	}
	root := apiextv1.JSONSchemaProps{
		Type:        "object",
		Description: g.docs["NodeReport"],
		Required:    []string{"report"},
		Properties: map[string]apiextv1.JSONSchemaProps{
			"apiVersion": {Type: "string", Description: "APIVersion defines the versioned schema of this representation of an object."},
			"kind":       {Type: "string", Description: "Kind is a string value representing the REST resource this object represents."},
			"metadata":   {Type: "object"},
			"report":     report,
			"status":     status,
		},
		XValidations: apiextv1.ValidationRules{{
			Rule:    "self.metadata.name == self.report.nodeName",
			Message: "a NodeReport is named after its node: metadata.name must equal report.nodeName",
		}},
	}
	col := func(name, typ, path, desc string, prio int32) apiextv1.CustomResourceColumnDefinition {
		return apiextv1.CustomResourceColumnDefinition{Name: name, Type: typ, JSONPath: path, Description: desc, Priority: prio}
	}
	crd := apiextv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: Resource + "." + GroupName},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: GroupName,
			Scope: apiextv1.ClusterScoped,
			Names: apiextv1.CustomResourceDefinitionNames{
				Kind: Kind, ListKind: Kind + "List", Plural: Resource, Singular: "nodereport",
				ShortNames: []string{"nrep"}, Categories: []string{"berth"},
			},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: Version, Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &root},
				AdditionalPrinterColumns: []apiextv1.CustomResourceColumnDefinition{
					col("Node", "string", ".report.nodeName", "The node the report describes.", 0),
					col("Ready", "integer", ".report.summary.ready", "Platforms the node can run.", 0),
					col("Warn", "integer", ".report.summary.warn", "Platforms the node can run with caveats.", 1),
					col("NotReady", "integer", ".report.summary.notReady", "Platforms the node cannot run.", 0),
					col("Berth", "string", ".report.berthVersion", "Version of the agent that wrote the report.", 1),
					col("Release", "string", ".report.install.version", "Version of the release manifest the node-installer last installed from.", 1),
					col("Installed", "string", `.status.conditions[?(@.type=="Installed")].status`, "Whether every requested platform is installed and proven (the Installed condition).", 0),
					col("Degraded", "string", `.status.conditions[?(@.type=="Degraded")].status`, "Whether a platform that worked fails (the Degraded condition).", 1),
					col("Observed", "date", ".report.observedAt", "When discovery ran.", 1),
					col("Age", "date", ".metadata.creationTimestamp", "", 0),
				},
			}},
		},
	}
	// The status stanza is server-owned; a manifest does not carry it.
	raw, err := json.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "status")
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	header := "# Generated from api/v1alpha1/types.go by `go test ./api/v1alpha1 -run TestCRD -update`. DO NOT EDIT.\n"
	return append([]byte(header), out...)
}

// TestCRD checks that the committed CRD is the one the Go types generate;
// run with -update after changing the types. The API server round trip in
// deploy/ checks the result is a valid structural schema that accepts a
// fully populated object unchanged.
func TestCRD(t *testing.T) {
	goldenfile.Assert(t, crdPath, generateCRD(t))
}
