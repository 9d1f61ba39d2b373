package decodeerr

import (
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// secret is the line of /etc/shadow the issue saw printed.
const secret = "root:$y$j9T$SECRETHASH:19000:0:99999:7:::"

// TestMessageOfRealDecoders feeds the decoders berth uses documents that
// are not what they expect (a shadow file, duplicate keys, a wrong type):
// the messages keep the line and the field and lose the text.
func TestMessageOfRealDecoders(t *testing.T) {
	var v struct {
		Name string `json:"name"`
	}
	for _, tc := range []struct {
		name string
		err  func() error
		keep []string
	}{
		{"YAML duplicate key", func() error {
			_, err := yaml.YAMLToJSONStrict([]byte("\"" + secret + "\": 1\n\"" + secret + "\": 2\n"))
			return err
		}, []string{"line 2"}},
		{"YAML syntax", func() error {
			_, err := yaml.YAMLToJSONStrict([]byte("a: [" + secret + "\n"))
			return err
		}, []string{"line"}},
		{"YAML strict unknown field", func() error {
			return yaml.UnmarshalStrict([]byte(secret+": x\n"), &v)
		}, []string{"unknown field"}},
		{"YAML strict wrong type", func() error {
			return yaml.UnmarshalStrict([]byte("name: [\""+secret+"\"]\n"), &v)
		}, []string{"name"}},
		{"JSON unknown field", func() error {
			d := json.NewDecoder(strings.NewReader(`{"` + secret + `": 1}`))
			d.DisallowUnknownFields()
			return d.Decode(&v)
		}, []string{"unknown field"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if err == nil {
				t.Fatal("no error")
			}
			got := Error(err)
			t.Logf("%s", got)
			if strings.Contains(got, "SECRETHASH") || strings.Contains(got, "19000") {
				t.Errorf("%q\nquotes the document (decoder said %q)", got, err)
			}
			for _, k := range tc.keep {
				if !strings.Contains(got, k) {
					t.Errorf("%q lacks %q (decoder said %q)", got, k, err)
				}
			}
			if strings.Contains(got, "\n") {
				t.Errorf("%q spans lines", got)
			}
		})
	}
}

func TestField(t *testing.T) {
	for name, shown := range map[string]bool{
		"apiVersion": true, "kernelCmdline": true, "io.containerd.grpc.v1.cri": true, "versoin": true,
		secret: false, "a b": false, "": false, strings.Repeat("a", 65): false, "$(id)": false,
	} {
		if got := Field(name); strings.Contains(got, `"`+name+`"`) != shown {
			t.Errorf("Field(%q) = %s, want shown %v", name, got, shown)
		}
	}
	if got := Message(`did not find expected ',' or ']'`); got != `did not find expected ',' or ']'` {
		t.Errorf("single characters lost: %s", got)
	}
}
