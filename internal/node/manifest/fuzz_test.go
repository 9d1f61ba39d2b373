package manifest

import (
	"encoding/json"
	"reflect"
	"testing"

	"berth.dev/berth/platform"
)

// FuzzManifest feeds arbitrary bytes to Parse. A manifest it accepts must be
// fully validated: every component resolves without panicking, its digest is
// canonical hex, and its JSON form parses back to the same manifest.
func FuzzManifest(f *testing.F) {
	ps := []string{"kata-qemu", "kata-fc", "kata-qemu-snp", "k3s-qemu-tdx+gpu", "k3s-qemu-snp-genoa"}
	var plats []platform.Platform
	for _, s := range ps {
		plats = append(plats, mustPlatform(f, s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, "fuzz")
		if err != nil {
			return
		}
		for _, c := range m.Components {
			if h, err := ParseSHA256(c.SHA256); err != nil || h != c.SHA256 {
				t.Fatalf("component %s: digest %q not canonical", c.Name, c.SHA256)
			}
		}
		for _, p := range plats {
			if cs, err := m.Resolve(p); err == nil {
				for _, c := range cs {
					if !c.Matches(p) {
						t.Fatalf("%s resolved for %s without matching", c.Name, p)
					}
				}
			}
			if p.Confidential() {
				_, _ = m.Boot(p)
			}
		}
		js, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Parse(js, "round trip")
		if err != nil {
			t.Fatalf("JSON form does not parse: %v\n%s", err, js)
		}
		if !reflect.DeepEqual(m.Components, m2.Components) || !reflect.DeepEqual(m.Measured, m2.Measured) {
			t.Fatalf("round trip changed the manifest:\n%s", js)
		}
	})
}
