package catalog

import (
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/platform"
)

func distributionChecks() []check.Check {
	return []check.Check{{
		ID:        "distribution.match",
		Title:     "if the platform matches the host's distribution",
		Why:       "Each distribution keeps its runtime configuration elsewhere (k3s and RKE2 render it from a template); a platform built for another distribution writes a file nobody reads.",
		Reads:     []string{"distribution.name"},
		Platforms: "all",
		Remedies:  []string{"choose the platform for the distribution the host runs (berth check without --platform lists them)"},
		Applies:   check.Always(check.Blocking),
		Key:       keyDistribution,
		RunFor: func(f *facts.Facts, p platform.Platform) check.Result {
			got, want := f.Distribution.Name, p.Distribution()
			ev := []check.Evidence{check.Ev("distribution.name", got)}
			if len(f.Distribution.Evidence) > 0 {
				ev = append(ev, check.Ev("distribution.evidence", strings.Join(f.Distribution.Evidence, "; ")))
			}
			switch {
			case want.UserLayout():
				return check.Ok("custom distribution: paths given at install", ev...)
			case got == "" && want == platform.DefaultDistribution():
				return check.Ok("no distribution detected: plain containerd (kubeadm layout)", ev...)
			case got == want.String():
				return check.Ok(got, ev...)
			case got == "":
				return check.Failed("no Kubernetes distribution detected, platform is for "+want.String(),
					"choose the kubeadm platform for a plain containerd node, or install "+want.String()+" first", ev...)
			}
			return check.Failed("this host runs "+got+", the platform is for "+want.String(),
				"choose the "+got+" variant of the platform", ev...)
		},
	}}
}
