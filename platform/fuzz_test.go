package platform

import (
	"errors"
	"testing"
)

// FuzzParse checks that Parse never panics, that every rejection is a
// *ValidationError, and that anything accepted round-trips through its
// canonical form and its Spec.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"k3s-qemu-snp-genoa+gpu", "kata-qemu-coco-dev", "AKS-CLH-SNP",
		"distribution=k3s,hypervisor=qemu,tee=snp,gpu=true", "openshift-cloud-hypervisor-none+debug"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse(%q): %T %v is not a *ValidationError", s, err, err)
			}
			if ve.Rule.ID == "" {
				t.Fatalf("Parse(%q): error without rule", s)
			}
			return
		}
		if !p.Valid() {
			t.Fatalf("Parse(%q) accepted an invalid platform", s)
		}
		q, err := Parse(p.String())
		if err != nil || q != p {
			t.Fatalf("Parse(%q) = %s, but Parse(%q) = %v, %v", s, p, p.String(), q, err)
		}
		if r, err := New(p.Spec()); err != nil || r != p {
			t.Fatalf("New(Spec of %s) = %v, %v", p, r, err)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	for _, in := range []string{"k3s-qemu-snp-genoa+gpu", "kata-qemu-coco-dev", "aks-qemu-tdx+gpu", "nonsense"} {
		b.Run(in, func(b *testing.B) {
			for b.Loop() {
				_, _ = Parse(in)
			}
		})
	}
	b.Run("All", func(b *testing.B) {
		for b.Loop() {
			_ = All()
		}
	})
}
