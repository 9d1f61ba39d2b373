package plugin

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func TestParseFeatures(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]string
		expiry  string
		wantErr string
	}{
		{name: "empty", in: "", want: map[string]string{}},
		{name: "lines", in: "# site facts\n\nattestation-url = https://kbs:8080/a=b\nsite.example.com/rack=r12\ngpu-ok\n",
			want: map[string]string{"attestation-url": "https://kbs:8080/a=b", "site.example.com/rack": "r12", "gpu-ok": "true"}},
		{name: "empty value", in: "k=\n", want: map[string]string{"k": ""}},
		{name: "later wins", in: "k=1\nk=2\n", want: map[string]string{"k": "2"}},
		{name: "crlf", in: "k=v\r\n", want: map[string]string{"k": "v"}},
		{name: "expiry", in: "# +expiry-time=2026-12-31T00:00:00Z\nk=v\n", want: map[string]string{"k": "v"}, expiry: "2026-12-31T00:00:00Z"},
		{name: "json", in: "# +expiry-time=2030-01-01T00:00:00+01:00\n{\"k\": \"v\", \"n\": 3, \"b\": false}\n",
			want: map[string]string{"k": "v", "n": "3", "b": "false"}, expiry: "2030-01-01T00:00:00+01:00"},
		{name: "bad key", in: "ok=1\n-bad=2\n", wantErr: `line 2: invalid key "-bad"`},
		{name: "bad prefix", in: "Site.Example/x=1\n", wantErr: `line 1: invalid key "Site.Example/x": bad prefix`},
		{name: "long name", in: strings.Repeat("a", 64) + "=1\n", wantErr: "line 1: invalid key"},
		{name: "control char", in: "k=a\x01b\n", wantErr: "line 1: key k: value \"a\\x01b\" contains a control character"},
		{name: "bad utf8", in: "k=\xff\n", wantErr: "not valid UTF-8"},
		{name: "bad expiry", in: "# +expiry-time=tomorrow\n", wantErr: "line 1: expiry time \"tomorrow\""},
		{name: "two expiries", in: "# +expiry-time=2026-12-31T00:00:00Z\n# +expiry-time=2026-12-31T00:00:00Z\n", wantErr: "line 2: second expiry-time"},
		{name: "unknown directive", in: "# +expires=2026-12-31\n", wantErr: `line 1: unknown directive`},
		{name: "json nested", in: "{\"k\": {\"a\": 1}}", wantErr: "line 1: key k: value must be a string, number or boolean"},
		{name: "json broken", in: "# c\n{\"k\": \n\"v\",}", wantErr: "line 3: invalid JSON at byte offset 16"},
		{name: "json trailing", in: "{\"k\": \"v\"}\nx=1\n", wantErr: "line 2: unexpected data after the JSON object"},
		{name: "errors bounded", in: strings.Repeat("-\n", 20), wantErr: "line 5: invalid key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ff, err := ParseFeatures([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err=%v, want %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "line 6:") {
					t.Errorf("more than %d line errors: %v", maxLineErrors, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ff.Features, tt.want) {
				t.Errorf("features %v, want %v", ff.Features, tt.want)
			}
			var want time.Time
			if tt.expiry != "" {
				want, _ = time.Parse(time.RFC3339, tt.expiry)
			}
			if !ff.Expiry.Equal(want) {
				t.Errorf("expiry %v, want %v", ff.Expiry, want)
			}
		})
	}
}

func TestValidateKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"a": true, "A.b_c-9": true, "x.example.com/name": true, "k8s.io/a": true,
		"": false, "-a": false, "a-": false, "a/b/c": false, "/a": false, "a/": false,
		"UPPER.example/a": false, "a b": false, "ä": false,
		strings.Repeat("a", 63): true, strings.Repeat("a", 64): false,
	} {
		if err := ValidateKey(key); (err == nil) != ok {
			t.Errorf("ValidateKey(%q) = %v, want ok=%v", key, err, ok)
		}
	}
}

func TestLoadFeatures(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	fsys := fstest.MapFS{
		"etc/berth/features.d/10-site":     {Data: []byte("url=https://a\nrack=1\n")},
		"etc/berth/features.d/20-override": {Data: []byte("rack=2\n")},
		"etc/berth/features.d/30-expired":  {Data: []byte("# +expiry-time=2026-01-01T00:00:00Z\nrack=3\n")},
		"etc/berth/features.d/40-bad":      {Data: []byte("ok=1\nbad key=1\n")},
		"etc/berth/features.d/50-big":      {Data: []byte(strings.Repeat("a=b\n", MaxFeatureFile/4+1))},
		"etc/berth/features.d/60-link":     {Data: []byte("x"), Mode: os.ModeSymlink},
		"etc/berth/features.d/.hidden":     {Data: []byte("rack=9\n")},
		"etc/berth/features.d/70-json~":    {Data: []byte("rack=9\n")},
		"etc/berth/features.d/80-future":   {Data: []byte("# +expiry-time=2027-01-01T00:00:00Z\n{\"zone\": \"eu\"}\n")},
	}
	got := LoadFeatures(fsys, FeaturesDir, now)
	wantFeatures := map[string]string{"url": "https://a", "rack": "2", "zone": "eu"}
	if !reflect.DeepEqual(got.Features, wantFeatures) {
		t.Errorf("features %v, want %v", got.Features, wantFeatures)
	}
	if got.Sources["rack"] != "etc/berth/features.d/20-override" || got.Sources["zone"] != "etc/berth/features.d/80-future" {
		t.Errorf("sources %v", got.Sources)
	}
	wantErrs := map[string]string{
		"40-bad":  "feature file etc/berth/features.d/40-bad: line 2: invalid key \"bad key\"",
		"50-big":  "larger than 64 KiB",
		"60-link": "not a regular file",
	}
	if len(got.Errors) != len(wantErrs) {
		t.Errorf("errors %v, want %d", got.Errors, len(wantErrs))
	}
	for _, e := range got.Errors {
		if w, ok := wantErrs[e.Name]; !ok || !strings.Contains(e.Message, w) {
			t.Errorf("error %+v, want one containing %q", e, w)
		}
	}
	if len(got.Notes) != 1 || got.Notes[0].Name != "30-expired" || !strings.Contains(got.Notes[0].Message, "expired at 2026-01-01T00:00:00Z: ignored") {
		t.Errorf("notes %v", got.Notes)
	}
}

func TestLoadFeaturesMissingDir(t *testing.T) {
	got := LoadFeatures(os.DirFS(t.TempDir()), FeaturesDir, time.Now())
	if got.Features != nil || got.Errors != nil {
		t.Errorf("got %+v, want nothing", got)
	}
}

// FuzzFeatureFile: the parser never panics, and whatever it accepts obeys
// the key and value rules.
func FuzzFeatureFile(f *testing.F) {
	f.Add([]byte("k=v\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ff, err := ParseFeatures(b)
		if err != nil {
			return
		}
		if len(ff.Keys) != len(ff.Features) {
			t.Fatalf("keys %v vs features %v", ff.Keys, ff.Features)
		}
		for k, v := range ff.Features {
			if ValidateKey(k) != nil || ValidateValue(v) != nil {
				t.Fatalf("accepted invalid %q=%q", k, v)
			}
		}
	})
}
