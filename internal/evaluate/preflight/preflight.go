// Package preflight is the "discover, then evaluate" step shared by
// `berth check` and the cluster agent: one place that turns a host root
// into facts and per-platform verdicts, so that both always agree.
package preflight

import (
	"context"
	"fmt"
	"slices"

	"berth.dev/berth/internal/evaluate/catalog"
	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/discover"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/platform"
)

// Options select what Run discovers and evaluates.
type Options struct {
	// Discover are the discovery options (clock, probes, logger).
	Discover discover.Options
	// Check turns results into verdicts (--ignore, --strict).
	Check check.Options
	// Platforms are evaluated in this order; empty means the platforms
	// that make sense for the host (see HostPlatforms).
	Platforms []platform.Platform
	// All selects every valid platform when Platforms is empty.
	All bool
	// Catalogue is catalog.All() when the caller has built it already (to
	// check --ignore against it); nil builds it here.
	Catalogue []check.Check
	// NoDebug leaves debug variants out of the defaulted platforms (the
	// agent: they double the label count and no workload selects them).
	NoDebug bool
	// Digest computes Result.FactsDigest (berth check's report).
	Digest bool
}

// Result is what one run found.
type Result struct {
	Facts *facts.Facts
	// Platforms are the evaluated platforms, in the order of Verdicts.
	Platforms []platform.Platform
	// Defaulted is set when Platforms were chosen by HostPlatforms rather
	// than requested.
	Defaulted bool
	Verdicts  []check.Verdict
	// FactsDigest is Facts.Digest when Options.Digest is set.
	FactsDigest string
}

// Run discovers root and evaluates the facts against the platforms.
//
// When the platforms do not depend on the facts (given, or all), the
// evaluation's plan (check.Plan: which checks apply to which platform) is
// made on the other core while discovery runs: for every valid platform it
// is about half of the evaluation.
func Run(ctx context.Context, root hostfs.Root, opt Options) (Result, error) {
	static := opt.Catalogue
	if static == nil {
		static = catalog.All()
	}
	var planned chan *check.Plan
	if len(opt.Platforms) > 0 || opt.All {
		planned = make(chan *check.Plan, 1)
		go func() {
			ps := opt.Platforms
			if len(ps) == 0 {
				ps = noDebug(HostPlatforms(nil, true), opt.NoDebug)
			}
			// A catalogue error is reported below, by the evaluator of
			// the whole catalogue.
			ev, err := check.NewEvaluator(static)
			if err != nil {
				planned <- nil
				return
			}
			planned <- ev.Plan(ps)
		}()
	}
	f := discover.Run(ctx, root, opt.Discover)
	ev, err := check.NewEvaluator(catalog.WithPlugins(static, f))
	if err != nil {
		return Result{}, fmt.Errorf("internal error in the check catalogue: %w", err)
	}
	var plan *check.Plan
	if planned != nil {
		plan = <-planned
	}
	if plan == nil {
		ps := opt.Platforms
		if len(ps) == 0 {
			ps = noDebug(HostPlatforms(f, opt.All), opt.NoDebug)
		}
		plan = ev.Plan(ps)
	}
	r := Result{Facts: f, Platforms: plan.Platforms(), Defaulted: len(opt.Platforms) == 0}
	r.Verdicts = ev.EvaluatePlan(f, plan, opt.Check)
	if opt.Digest {
		if r.FactsDigest, err = f.Digest(); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// noDebug leaves the debug variants out of ps when drop is set.
func noDebug(ps []platform.Platform, drop bool) []platform.Platform {
	if !drop {
		return ps
	}
	return slices.DeleteFunc(ps, platform.Platform.Debug)
}

// HostPlatforms are the platforms that make sense for the host: those of
// the detected distribution (kubeadm when none), one per kata-deploy shim
// (and its debug class): a non-default snapshotter is listed only where it
// makes another shim (QEMU with nydus is kata-qemu-coco-dev), since it
// changes no host prerequisite the snapshotter checks do not already show
// for the default; without SNP platforms pinned to another product line
// than the CPU's. all selects every valid platform.
func HostPlatforms(f *facts.Facts, all bool) []platform.Platform {
	if all {
		return platform.All()
	}
	dist := platform.DefaultDistribution()
	if d, err := platform.ParseDistribution(f.Distribution.Name); err == nil && f.Distribution.Name != "" {
		dist = d
	}
	line, _ := platform.ProductLineOfCPU(f.CPU.ProductLine)
	list := platform.AllFor(dist)
	// A platform's twin on its default snapshotter, when valid, is in
	// the list: looked up there rather than built again (platform.New
	// validates and names it, a third of this function's time).
	at := make(map[platform.Spec]int, len(list))
	for i, p := range list {
		at[p.Spec()] = i
	}
	var out []platform.Platform
	for _, p := range list {
		if pl := p.ProductLine(); pl.Pinned() && pl != line {
			continue
		}
		if p.Snapshotter() != p.DefaultSnapshotter() {
			s := p.Spec()
			s.Snapshotter = p.DefaultSnapshotter()
			if j, ok := at[s]; ok && list[j].Shim() == p.Shim() {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}
