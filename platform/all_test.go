package platform

import (
	"slices"
	"testing"
)

// allByBuild is All as a plain walk of every spec through build, in All's
// documented nesting: the reference that appendAllFor's shortcuts are held
// to.
func allByBuild() []Platform {
	var out []Platform
	for _, d := range Distributions() {
		for _, h := range Hypervisors() {
			for _, rt := range h.Runtimes() {
				for _, t := range TEEs() {
					for _, pl := range append([]ProductLine{AnyProductLine}, ProductLines()...) {
						for _, v := range variants() {
							for _, debug := range []bool{false, true} {
								for _, sn := range Snapshotters() {
									p, id := build(Spec{Distribution: d, Hypervisor: h, TEE: t, ProductLine: pl,
										Snapshotter: sn, GPU: v.gpu, Debug: debug, KataRuntime: rt, NvidiaCPU: v.nvcpu})
									if id == "" {
										out = append(out, p)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	return out
}

// TestAllOrder holds All, and AllFor per distribution, to the walk of
// every spec through build: the same platforms, names and order.
func TestAllOrder(t *testing.T) {
	want := allByBuild()
	got := All()
	if !slices.Equal(got, want) {
		t.Fatalf("All: %d platforms, the walk through build %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	// The count that sizes the list is exact.
	if cap(got) != len(got) {
		t.Errorf("All: %d platforms in a list of capacity %d", len(got), cap(got))
	}
	var per []Platform
	for _, d := range Distributions() {
		one := AllFor(d)
		if cap(one) != len(one) {
			t.Errorf("AllFor(%s): %d platforms in a list of capacity %d", d, len(one), cap(one))
		}
		per = append(per, one...)
	}
	if !slices.Equal(per, want) {
		t.Fatalf("AllFor: first difference at %d", firstDiff(per, want))
	}
	for _, p := range got {
		if q, err := New(p.Spec()); err != nil || q != p {
			t.Errorf("%s: New(Spec()) = %v, %v", p, q, err)
		}
		if p.String() != formatSpec(p.Spec()) || p.Shim() != shimOf(p) {
			t.Errorf("%s: names %q %q %q", p, p.String(), p.Name(), p.Shim())
		}
	}
}

func firstDiff(a, b []Platform) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestRuleDimensions backs All's shortcuts: a rule not marked as reading
// the snapshotter gives the same answer for every snapshotter, and no rule
// reads the debug variant.
func TestRuleDimensions(t *testing.T) {
	for _, c := range checks() {
		for _, d := range Distributions() {
			for _, h := range Hypervisors() {
				for _, rt := range KataRuntimes() {
					for _, tee := range TEEs() {
						for _, pl := range append([]ProductLine{AnyProductLine}, ProductLines()...) {
							for _, v := range variants() {
								p := Platform{dist: d, hv: h, tee: tee, pl: pl, gpu: v.gpu, nvcpu: v.nvcpu, rt: rt}
								first := c.ok(p)
								for _, sn := range Snapshotters() {
									p.snap, p.debug = sn, false
									ok := c.ok(p)
									if !c.snap && ok != first {
										t.Fatalf("rule %s reads the snapshotter (%v: %v, without: %v) but is not marked so", c.id, sn, ok, first)
									}
									p.debug = true
									if c.ok(p) != ok {
										t.Fatalf("rule %s reads the debug variant", c.id)
									}
								}
							}
						}
					}
				}
			}
		}
	}
}
