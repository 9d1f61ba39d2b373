package discover

import (
	"regexp"
	"testing"

	"berth.dev/berth/internal/host/lazyre"
)

// TestLazyRegexps compiles every pattern that is compiled on first use,
// so that a typo fails here rather than on the host whose files first
// reach it.
func TestLazyRegexps(t *testing.T) {
	all := map[string]*lazyre.Regexp{
		"snpAPIRe": snpAPIRe, "sevAPIRe": sevAPIRe, "snpTooOldRe": snpTooOldRe, "rmpOKRe": rmpOKRe,
		"rmpMissingRe": rmpMissingRe, "asidRangeRe": asidRangeRe, "asidCountRe": asidCountRe,
		"sevInitFailRe": sevInitFailRe, "iommuSNPOKRe": iommuSNPOKRe, "iommuSNPBadRe": iommuSNPBadRe,
		"tdxLineRe": tdxLineRe, "tdxKeyIDRe": tdxKeyIDRe, "tdxInitOKRe": tdxInitOKRe, "tdxVerARe": tdxVerARe,
		"tdxVerBRe": tdxVerBRe, "tdxFailRe": tdxFailRe,
		"qemuRe": qemuRe, "clhRe": clhRe, "fcRe": fcRe, "virtiofsRe": virtiofsRe, "ctrdRe": ctrdRe,
		"crioRe": crioRe, "kataRtRe": kataRtRe, "kataShimRe": kataShimRe, "nydusRe": nydusRe,
		"leadingVersion": leadingVersion, "versionShape": versionShape,
	}
	for name, l := range all {
		t.Run(name, func(t *testing.T) {
			var re *regexp.Regexp
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("does not compile: %v", r)
					}
				}()
				re = l.Get()
			}()
			if re != l.Get() {
				t.Error("compiled twice")
			}
		})
	}
}
