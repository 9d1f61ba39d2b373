package fleet

import (
	"fmt"
	"reflect"
	"testing"
)

func node(name, class string, facts map[string]string, verdicts map[string]string) Node {
	return Node{Name: name, Class: class, Facts: facts, Verdicts: verdicts}
}

func TestAnalyze(t *testing.T) {
	k := func(kernel, qemu string) map[string]string {
		return map[string]string{"kernel.release": kernel, "qemu.version": qemu}
	}
	rdy := map[string]string{"k3s-qemu-snp": Ready, "k3s-qemu": Ready}
	blk := map[string]string{"k3s-qemu-snp": NotReady, "k3s-qemu": Ready}
	nodes := []Node{
		node("a1", "amd genoa", k("6.8.0", "9.1"), rdy),
		node("a2", "amd genoa", k("6.8.0", "9.1"), rdy),
		node("a3", "amd genoa", k("6.5.0", "9.1"), blk),
		node("i1", "intel emr", k("6.8.0", "9.1"), map[string]string{"k3s-qemu": ReadyWithWarnings}),
		node("i2", "intel emr", k("6.9.0", "9.1"), map[string]string{"k3s-qemu": ReadyWithWarnings}),
	}
	nodes[2].BlockedBy = map[string]string{"k3s-qemu-snp": "tee.snp.kernel"}
	a := Analyze(nodes, []Malformed{{Name: "zz", Reason: "bad"}})

	if want := []string{"k3s-qemu", "k3s-qemu-snp"}; !reflect.DeepEqual(a.Platforms, want) {
		t.Errorf("platforms %v, want %v", a.Platforms, want)
	}
	wantGroups := []Group{
		{Class: "amd genoa", Nodes: []string{"a1", "a2"}, Verdicts: []string{Ready, Ready}, BlockedBy: []string{"", ""}},
		{Class: "intel emr", Nodes: []string{"i1", "i2"}, Verdicts: []string{ReadyWithWarnings, Absent}, BlockedBy: []string{"", ""}},
		{Class: "amd genoa", Nodes: []string{"a3"}, Verdicts: []string{Ready, NotReady}, BlockedBy: []string{"", "tee.snp.kernel"}},
	}
	if !reflect.DeepEqual(a.Groups, wantGroups) {
		t.Errorf("groups\n got %+v\nwant %+v", a.Groups, wantGroups)
	}
	wantOut := []Outlier{{Node: "a3", Class: "amd genoa", Fact: "kernel.release", Value: "6.5.0", Majority: "6.8.0", MajorityCount: 2, ClassSize: 3}}
	if !reflect.DeepEqual(a.Outliers, wantOut) {
		t.Errorf("outliers\n got %+v\nwant %+v", a.Outliers, wantOut)
	}
	wantSplit := []Split{{Class: "intel emr", Fact: "kernel.release", Values: []ValueCount{{"6.8.0", 1}, {"6.9.0", 1}}}}
	if !reflect.DeepEqual(a.Splits, wantSplit) {
		t.Errorf("splits\n got %+v\nwant %+v", a.Splits, wantSplit)
	}
	s, ok := a.PlatformSummary("k3s-qemu-snp")
	if !ok || s.Ready != 2 || s.NotReady != 1 || s.Absent != 2 || s.Usable() != 2 {
		t.Errorf("summary k3s-qemu-snp = %+v, %v", s, ok)
	}
	if len(a.Malformed) != 1 {
		t.Errorf("malformed %v", a.Malformed)
	}
}

func TestAnalyzeMissingFactIsADifference(t *testing.T) {
	nodes := []Node{
		node("a", "c", map[string]string{"module.kvm_amd": "present"}, nil),
		node("b", "c", map[string]string{"module.kvm_amd": "present"}, nil),
		node("c", "c", map[string]string{}, nil),
	}
	a := Analyze(nodes, nil)
	if len(a.Outliers) != 1 || a.Outliers[0].Node != "c" || a.Outliers[0].Value != "" {
		t.Fatalf("outliers %+v", a.Outliers)
	}
}

func TestAnalyzeEmpty(t *testing.T) {
	a := Analyze(nil, nil)
	if a.Nodes != 0 || len(a.Groups) != 0 || a.Platforms == nil || a.Outliers == nil || a.Malformed == nil {
		t.Fatalf("%+v", a)
	}
}

// synthetic builds n nodes in a few classes with a handful of outliers,
// shaped like real reports: ~10 facts and ~12 platforms per node.
func synthetic(n int) []Node {
	classes := []string{"amd genoa / nvidia h100", "amd milan", "intel emr", "intel spr / nvidia h100"}
	plats := []string{"k3s-qemu", "k3s-qemu-snp", "k3s-qemu-snp-genoa", "k3s-qemu-tdx", "k3s-clh", "k3s-fc",
		"k3s-qemu-gpu", "k3s-qemu-snp-gpu", "k3s-qemu-tdx-gpu", "k3s-qemu-nydus", "k3s-clh-snp", "k3s-qemu-debug"}
	nodes := make([]Node, n)
	for i := range nodes {
		f := map[string]string{
			"kernel.release": "6.8.0-45-generic", "containerd.version": "2.1.4", "qemu.version": "9.1.2",
			"tee": "snp", "tee.snp.firmware": "1.55.22", "kvm": "true",
			"module.kvm_amd": "present", "module.vfio_pci": "present", "module.vhost_vsock": "present", "os": "ubuntu 24.04",
		}
		if i%997 == 0 {
			f["kernel.release"] = "6.5.0-1-generic"
		}
		if i%1499 == 0 {
			delete(f, "module.vhost_vsock")
		}
		v := make(map[string]string, len(plats))
		for j, p := range plats {
			switch {
			case (i+j)%13 == 0:
				v[p] = NotReady
			case j%3 == 0:
				v[p] = ReadyWithWarnings
			default:
				v[p] = Ready
			}
		}
		nodes[i] = Node{Name: fmt.Sprintf("node-%06d", i), Class: classes[i%len(classes)], Facts: f, Verdicts: v,
			BlockedBy: map[string]string{plats[i%len(plats)]: "tee.snp.firmware"}}
	}
	return nodes
}

func TestAnalyzeSynthetic(t *testing.T) {
	nodes := synthetic(10000)
	a := Analyze(nodes, nil)
	total := 0
	for _, g := range a.Groups {
		total += len(g.Nodes)
	}
	if total != len(nodes) {
		t.Fatalf("groups hold %d nodes, want %d", total, len(nodes))
	}
	if len(a.Groups) > 13*4 {
		t.Errorf("%d groups: identical nodes are not collapsed", len(a.Groups))
	}
	var kernels, vsock int
	for _, o := range a.Outliers {
		switch o.Fact {
		case "kernel.release":
			kernels++
		case "module.vhost_vsock":
			vsock++
		}
	}
	if kernels != (10000+996)/997 || vsock != (10000+1498)/1499 {
		t.Errorf("outliers: %d kernel, %d vhost_vsock", kernels, vsock)
	}
}

// BenchmarkAnalyze100k is the fleet analysis on 100,000 reports in memory
// (target: under 3 s per op on the build machine).
func BenchmarkAnalyze100k(b *testing.B) {
	nodes := synthetic(100000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Analyze(nodes, nil)
	}
}
