package facts

import "testing"

func TestUnknownReason(t *testing.T) {
	f := &Facts{Unknown: []Missing{
		{Field: "kernel.config", Reason: "missing: proc/config.gz"},
		{Field: "pci[0000:00:01.0]", Reason: "unparseable"},
		{Field: "tee", Reason: "permission denied"},
	}}
	for _, tc := range []struct {
		field, want string
		ok          bool
	}{
		{"kernel.config", "missing: proc/config.gz", true},
		{"kernel.config.KVM", "missing: proc/config.gz", true},
		{"kernel.configs", "", false}, // a longer name, not a field below
		{"kernel", "", false},         // a parent of an unknown field is not unknown itself
		{"pci[0000:00:01.0]", "unparseable", true},
		{"pci[0000:00:01.0].vendor", "unparseable", true},
		{"tee.snp.enabled", "permission denied", true},
		{"teeth", "", false},
		{"", "", false},
	} {
		got, ok := f.UnknownReason(tc.field)
		if got != tc.want || ok != tc.ok {
			t.Errorf("UnknownReason(%q) = %q, %v; want %q, %v", tc.field, got, ok, tc.want, tc.ok)
		}
	}
}
