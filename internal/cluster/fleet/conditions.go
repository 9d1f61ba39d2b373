package fleet

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"berth.dev/berth/api/v1alpha1"
)

// Condition is one of a node's NodeReport conditions (Ready, Installed,
// Degraded), as the analysis needs it.
type Condition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// NodeReason is a node and the reason of one of its conditions.
type NodeReason struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// ClassConditions counts, for one hardware class, the nodes whose
// conditions are True, and names the nodes that are not Ready, not
// Installed or Degraded, with the reason.
type ClassConditions struct {
	Class string `json:"class"`
	// Nodes counts the class's nodes whose report has conditions.
	Nodes     int `json:"nodes"`
	Ready     int `json:"ready"`
	Installed int `json:"installed"`
	Degraded  int `json:"degraded"`
	// NotReadyNodes, NotInstalledNodes and DegradedNodes name the nodes,
	// sorted.
	NotReadyNodes     []NodeReason `json:"notReadyNodes,omitempty"`
	NotInstalledNodes []NodeReason `json:"notInstalledNodes,omitempty"`
	DegradedNodes     []NodeReason `json:"degradedNodes,omitempty"`
}

// conditionsOf is the analysis model of a report's conditions.
func conditionsOf(s *v1alpha1.NodeReportStatus) []Condition {
	if s == nil {
		return nil
	}
	var out []Condition
	for _, c := range s.Conditions {
		out = append(out, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason})
	}
	return out
}

// conditionSummary summarises the conditions per hardware class, classes
// sorted; nodes without conditions (an agent older than them) are left
// out.
func conditionSummary(nodes []Node) []ClassConditions {
	by := map[string]*ClassConditions{}
	for i := range nodes {
		n := &nodes[i]
		if len(n.Conditions) == 0 {
			continue
		}
		s := by[n.Class]
		if s == nil {
			s = &ClassConditions{Class: n.Class}
			by[n.Class] = s
		}
		s.Nodes++
		for _, c := range n.Conditions {
			true_ := c.Status == "True"
			nr := NodeReason{Node: n.Name, Reason: cmp.Or(c.Reason, c.Status)}
			switch c.Type {
			case v1alpha1.ConditionReady:
				if true_ {
					s.Ready++
				} else {
					s.NotReadyNodes = append(s.NotReadyNodes, nr)
				}
			case v1alpha1.ConditionInstalled:
				if true_ {
					s.Installed++
				} else {
					s.NotInstalledNodes = append(s.NotInstalledNodes, nr)
				}
			case v1alpha1.ConditionDegraded:
				if true_ {
					s.Degraded++
					s.DegradedNodes = append(s.DegradedNodes, nr)
				}
			}
		}
	}
	out := make([]ClassConditions, 0, len(by))
	byNode := func(x, y NodeReason) int { return cmp.Compare(x.Node, y.Node) }
	for _, s := range by {
		slices.SortFunc(s.NotReadyNodes, byNode)
		slices.SortFunc(s.NotInstalledNodes, byNode)
		slices.SortFunc(s.DegradedNodes, byNode)
		out = append(out, *s)
	}
	slices.SortFunc(out, func(x, y ClassConditions) int { return cmp.Compare(x.Class, y.Class) })
	return out
}

// writeConditionsText prints the conditions per hardware class and the
// nodes that are not Ready, not Installed or Degraded; nothing when no
// report has conditions.
func writeConditionsText(w io.Writer, a *Analysis) {
	if len(a.Conditions) == 0 {
		return
	}
	fmt.Fprintln(w, "\nConditions (NodeReport status.conditions; kubectl wait --for=condition=Installed nodereport/NODE):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tNODES\tREADY\tINSTALLED\tDEGRADED")
	for _, s := range a.Conditions {
		fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%d/%d\t%d\n", s.Class, s.Nodes, s.Ready, s.Nodes, s.Installed, s.Nodes, s.Degraded)
	}
	tw.Flush()
	for _, s := range a.Conditions {
		for _, l := range []struct {
			what  string
			nodes []NodeReason
		}{{"Degraded", s.DegradedNodes}, {"not Installed", s.NotInstalledNodes}, {"not Ready", s.NotReadyNodes}} {
			if len(l.nodes) == 0 {
				continue
			}
			fmt.Fprintf(w, "  [%s] %s: %s\n", s.Class, l.what, reasonList(l.nodes))
		}
	}
}

// reasonList names up to maxListed nodes with their reasons.
func reasonList(ns []NodeReason) string {
	parts := make([]string, 0, min(len(ns), maxListed))
	for i, n := range ns {
		if i == maxListed {
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", n.Node, n.Reason))
	}
	s := strings.Join(parts, ", ")
	if len(ns) > maxListed {
		s += fmt.Sprintf(" and %d more", len(ns)-maxListed)
	}
	return s
}
