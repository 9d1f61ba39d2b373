// Package fleet analyses the NodeReports of a cluster: which node can run
// which platform (a node x platform matrix with identical nodes collapsed
// into groups) and which nodes differ from the other nodes of the same
// hardware class in a fact that matters (kernel, containerd, QEMU,
// firmware, TEE state, modules). The analysis works on a small in-memory
// model so that it can be benchmarked on 100,000 nodes without an API
// server; decode.go builds the model from unstructured objects.
package fleet

import (
	"cmp"
	"slices"
	"strings"
)

// The verdict values of a node for a platform (check.VerdictStatus), plus
// Absent when the node's report does not mention the platform at all.
const (
	Ready             = "ready"
	ReadyWithWarnings = "ready-with-warnings"
	NotReady          = "not-ready"
	Absent            = ""
)

// Node is what the fleet analysis needs from one NodeReport.
type Node struct {
	Name string `json:"name"`
	// Class is the hardware class: nodes of one class are expected to be
	// configured alike (e.g. "amd genoa / nvidia h100").
	Class string `json:"class"`
	// Facts are the key facts compared within a class, by dotted name.
	Facts map[string]string `json:"facts,omitempty"`
	// Verdicts map platform names (platform.Platform.Name) to a verdict.
	Verdicts map[string]string `json:"verdicts,omitempty"`
	// BlockedBy maps platform names to the first blocking check ID.
	BlockedBy map[string]string `json:"blockedBy,omitempty"`
	// Install is what the node-installer last did on the node, one entry
	// per platform (none when no node-installer ran there).
	Install []Install `json:"install,omitempty"`
	// Conditions are the report's status.conditions (none from an agent
	// older than them).
	Conditions []Condition `json:"conditions,omitempty"`
}

// The install states of a platform on a node (v1alpha1.InstallState).
const (
	Installed     = "installed"
	InstallFailed = "failed"
	// NotReady ("not-ready") is shared with the verdicts.
)

// Install is the node-installer's outcome for one platform on one node.
type Install struct {
	Platform string `json:"platform"`
	// State is installed, not-ready or failed.
	State string `json:"state"`
	// Release is the release manifest's version, with the first 12 hex
	// digits of its digest ("3.24.0@sha256:0123456789ab") when known.
	Release string `json:"release,omitempty"`
	// Error says why a platform is not-ready or failed.
	Error string `json:"error,omitempty"`
}

// InstallSummary counts the nodes per install state for one platform.
type InstallSummary struct {
	Platform  string `json:"platform"`
	Installed int    `json:"installed"`
	NotReady  int    `json:"notReady"`
	Failed    int    `json:"failed"`
	// Releases counts the nodes with the platform installed per release,
	// most common first: more than one means a rollout is under way or
	// stuck.
	Releases []ValueCount `json:"releases,omitempty"`
}

// InstallFailure is a node where installing a platform failed, with the
// node-installer's error.
type InstallFailure struct {
	Node     string `json:"node"`
	Platform string `json:"platform"`
	Release  string `json:"release,omitempty"`
	Error    string `json:"error"`
}

// Malformed is a NodeReport that could not be read; the analysis goes on
// without it.
type Malformed struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Group is a set of nodes with the same class and the same verdict for
// every platform.
type Group struct {
	Class string   `json:"class"`
	Nodes []string `json:"nodes"`
	// Verdicts are aligned with Analysis.Platforms.
	Verdicts []string `json:"verdicts"`
	// BlockedBy is the most common blocking check per platform among the
	// group's not-ready nodes (aligned with Platforms, "" when none).
	BlockedBy []string `json:"blockedBy"`
}

// Outlier is a node whose fact differs from the majority of its class.
type Outlier struct {
	Node  string `json:"node"`
	Class string `json:"class"`
	Fact  string `json:"fact"`
	// Value is the node's value ("" when the node does not report it).
	Value string `json:"value"`
	// Majority is the value most nodes of the class have, shared by
	// MajorityCount of ClassSize nodes.
	Majority      string `json:"majority"`
	MajorityCount int    `json:"majorityCount"`
	ClassSize     int    `json:"classSize"`
}

// Split is a fact on which a class has no majority value at all: no node
// is an outlier, but the class is not uniform either.
type Split struct {
	Class string `json:"class"`
	Fact  string `json:"fact"`
	// Values counts the nodes per value, most common first.
	Values []ValueCount `json:"values"`
}

// ValueCount is one value of a fact and how many nodes have it.
type ValueCount struct {
	Value string `json:"value"`
	Nodes int    `json:"nodes"`
}

// PlatformSummary counts the nodes per verdict for one platform.
type PlatformSummary struct {
	Platform          string `json:"platform"`
	Ready             int    `json:"ready"`
	ReadyWithWarnings int    `json:"readyWithWarnings"`
	NotReady          int    `json:"notReady"`
	// Absent counts the nodes that do not evaluate the platform (another
	// distribution, or restricted with --platform on the agent).
	Absent int `json:"absent"`
}

// Usable is the number of nodes that can run the platform.
func (s PlatformSummary) Usable() int { return s.Ready + s.ReadyWithWarnings }

// Analysis is the fleet view.
type Analysis struct {
	Nodes     int               `json:"nodes"`
	Platforms []string          `json:"platforms"`
	Summary   []PlatformSummary `json:"summary"`
	Groups    []Group           `json:"groups"`
	Outliers  []Outlier         `json:"outliers"`
	Splits    []Split           `json:"splits,omitempty"`
	// GPUs summarises the GPUs of each hardware class with GPU nodes.
	GPUs      []GPUClass  `json:"gpus,omitempty"`
	Malformed []Malformed `json:"malformed,omitempty"`
	// InstallNodes counts the nodes whose report carries a node-installer
	// run; Install and InstallFailures are empty when none does.
	InstallNodes    int              `json:"installNodes,omitempty"`
	Install         []InstallSummary `json:"install,omitempty"`
	InstallFailures []InstallFailure `json:"installFailures,omitempty"`
	// Conditions summarise the reports' conditions per hardware class
	// (empty when no report has any).
	Conditions []ClassConditions `json:"conditions,omitempty"`
}

// Summary returns the counts for platform name, and whether any node
// mentioned it.
func (a *Analysis) PlatformSummary(name string) (PlatformSummary, bool) {
	for _, s := range a.Summary {
		if s.Platform == name {
			return s, true
		}
	}
	return PlatformSummary{Platform: name, Absent: a.Nodes}, false
}

// Analyze builds the fleet view. It does not modify nodes.
func Analyze(nodes []Node, malformed []Malformed) *Analysis {
	a := &Analysis{Nodes: len(nodes), Malformed: slices.Clone(malformed)}
	if a.Malformed == nil {
		a.Malformed = []Malformed{}
	}
	slices.SortFunc(a.Malformed, func(x, y Malformed) int { return cmp.Compare(x.Name, y.Name) })

	// Columns: every platform any node mentions, sorted by name.
	pidx := map[string]int{}
	for i := range nodes {
		for p := range nodes[i].Verdicts {
			if _, ok := pidx[p]; !ok {
				pidx[p] = 0
				a.Platforms = append(a.Platforms, p)
			}
		}
	}
	slices.Sort(a.Platforms)
	if a.Platforms == nil {
		a.Platforms = []string{}
	}
	for i, p := range a.Platforms {
		pidx[p] = i
	}
	np := len(a.Platforms)
	a.Summary = make([]PlatformSummary, np)
	for i, p := range a.Platforms {
		a.Summary[i].Platform = p
	}

	// Groups: nodes with the same class and verdict row. The key is the
	// class and one byte per platform, built in a reused buffer.
	type groupAcc struct {
		g       *Group
		blocked []map[string]int
	}
	groups := map[string]*groupAcc{}
	var order []*groupAcc
	row := make([]byte, np)
	var key strings.Builder
	for i := range nodes {
		n := &nodes[i]
		for j := range row {
			row[j] = 0
		}
		for p, v := range n.Verdicts {
			row[pidx[p]] = verdictCode(v)
		}
		for j, c := range row {
			s := &a.Summary[j]
			switch c {
			case 1:
				s.Ready++
			case 2:
				s.ReadyWithWarnings++
			case 3:
				s.NotReady++
			default:
				s.Absent++
			}
		}
		key.Reset()
		key.WriteString(n.Class)
		key.WriteByte(0)
		key.Write(row)
		acc, ok := groups[key.String()]
		if !ok {
			vs := make([]string, np)
			for j, c := range row {
				vs[j] = verdictName(c)
			}
			acc = &groupAcc{g: &Group{Class: n.Class, Verdicts: vs, BlockedBy: make([]string, np)}, blocked: make([]map[string]int, np)}
			groups[key.String()] = acc
			order = append(order, acc)
		}
		acc.g.Nodes = append(acc.g.Nodes, n.Name)
		for p, b := range n.BlockedBy {
			j, ok := pidx[p]
			if !ok || b == "" {
				continue
			}
			if acc.blocked[j] == nil {
				acc.blocked[j] = map[string]int{}
			}
			acc.blocked[j][b]++
		}
	}
	a.Groups = make([]Group, 0, len(order))
	for _, acc := range order {
		for j, m := range acc.blocked {
			acc.g.BlockedBy[j] = mostCommon(m)
		}
		slices.Sort(acc.g.Nodes)
		a.Groups = append(a.Groups, *acc.g)
	}
	// Biggest groups first; ties by class, then first node name.
	slices.SortFunc(a.Groups, func(x, y Group) int {
		if c := cmp.Compare(len(y.Nodes), len(x.Nodes)); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Class, y.Class); c != 0 {
			return c
		}
		return cmp.Compare(x.Nodes[0], y.Nodes[0])
	})

	a.Outliers, a.Splits = consistency(nodes)
	a.GPUs = gpuClasses(nodes)
	a.InstallNodes, a.Install, a.InstallFailures = installs(nodes)
	a.Conditions = conditionSummary(nodes)
	return a
}

// installs summarises the node-installer's outcomes per platform and lists
// the failures, by platform then node.
func installs(nodes []Node) (int, []InstallSummary, []InstallFailure) {
	reported := 0
	by := map[string]*InstallSummary{}
	releases := map[string]map[string]int{}
	var failures []InstallFailure
	for i := range nodes {
		n := &nodes[i]
		if len(n.Install) > 0 {
			reported++
		}
		for _, in := range n.Install {
			s, ok := by[in.Platform]
			if !ok {
				s = &InstallSummary{Platform: in.Platform}
				by[in.Platform] = s
			}
			switch in.State {
			case Installed:
				s.Installed++
				if releases[in.Platform] == nil {
					releases[in.Platform] = map[string]int{}
				}
				releases[in.Platform][in.Release]++
			case NotReady:
				s.NotReady++
			case InstallFailed:
				s.Failed++
				failures = append(failures, InstallFailure{Node: n.Name, Platform: in.Platform, Release: in.Release, Error: in.Error})
			}
		}
	}
	out := make([]InstallSummary, 0, len(by))
	for p, s := range by {
		if rs := releases[p]; len(rs) > 0 {
			s.Releases = valueCounts(rs)
		}
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y InstallSummary) int { return cmp.Compare(x.Platform, y.Platform) })
	slices.SortFunc(failures, func(x, y InstallFailure) int {
		if c := cmp.Compare(x.Platform, y.Platform); c != 0 {
			return c
		}
		return cmp.Compare(x.Node, y.Node)
	})
	return reported, out, failures
}

// consistency compares every fact within each hardware class.
func consistency(nodes []Node) ([]Outlier, []Split) {
	classes := map[string][]int{}
	for i := range nodes {
		classes[nodes[i].Class] = append(classes[nodes[i].Class], i)
	}
	names := make([]string, 0, len(classes))
	for c := range classes {
		names = append(names, c)
	}
	slices.Sort(names)
	outliers := []Outlier{}
	var splits []Split
	for _, class := range names {
		members := classes[class]
		if len(members) < 2 {
			continue
		}
		// Every fact any member reports; a member without it has "".
		keys := map[string]struct{}{}
		for _, i := range members {
			for k := range nodes[i].Facts {
				keys[k] = struct{}{}
			}
		}
		facts := make([]string, 0, len(keys))
		for k := range keys {
			facts = append(facts, k)
		}
		slices.Sort(facts)
		for _, fact := range facts {
			counts := map[string]int{}
			for _, i := range members {
				counts[nodes[i].Facts[fact]]++
			}
			if len(counts) == 1 {
				continue
			}
			vc := valueCounts(counts)
			top := vc[0]
			if top.Nodes*2 <= len(members) {
				splits = append(splits, Split{Class: class, Fact: fact, Values: vc})
				continue
			}
			for _, i := range members {
				if v := nodes[i].Facts[fact]; v != top.Value {
					outliers = append(outliers, Outlier{
						Node: nodes[i].Name, Class: class, Fact: fact, Value: v,
						Majority: top.Value, MajorityCount: top.Nodes, ClassSize: len(members),
					})
				}
			}
		}
	}
	slices.SortStableFunc(outliers, func(x, y Outlier) int {
		if c := cmp.Compare(x.Node, y.Node); c != 0 {
			return c
		}
		return cmp.Compare(x.Fact, y.Fact)
	})
	return outliers, splits
}

func mostCommon(m map[string]int) string {
	best, n := "", 0
	for k, c := range m {
		if c > n || (c == n && k < best) {
			best, n = k, c
		}
	}
	return best
}

func verdictCode(v string) byte {
	switch v {
	case Ready:
		return 1
	case ReadyWithWarnings:
		return 2
	case NotReady:
		return 3
	}
	return 0
}

func verdictName(c byte) string {
	switch c {
	case 1:
		return Ready
	case 2:
		return ReadyWithWarnings
	case 3:
		return NotReady
	}
	return Absent
}
