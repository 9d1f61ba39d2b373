package fleet

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"berth.dev/berth/api/v1alpha1"
	"berth.dev/berth/internal/cluster/nodereport"
)

// The facts of a GPU node the fleet view shows per class (and compares
// within it, so a node whose GPU is in another CC mode is an outlier).
const (
	// factCCMode is the node's GPU CC mode as its label carries it
	// (nodereport.GPUCCMode: on, ppcie, devtools, off, mixed, unknown).
	factCCMode = "gpu.ccMode"
	// factPassthrough is how many passthrough GPUs the Node advertises
	// (nvidia.com/pgpu or the per-model names), "0" for none.
	factPassthrough = "gpu.passthrough"
)

// gpuFacts adds the GPU facts of r to m; nothing for a node without GPUs.
func gpuFacts(r *v1alpha1.Report, m map[string]string) {
	if len(r.Facts.GPUs) == 0 {
		return
	}
	if mode := nodereport.GPUCCMode(r); mode != "" {
		m[factCCMode] = mode
	}
	n := 0
	for _, g := range r.GPUResources {
		if nodereport.PassthroughGPU(g.Name) {
			n += int(g.Allocatable)
		}
	}
	m[factPassthrough] = strconv.Itoa(n)
}

// GPUClass is the GPUs of one hardware class (the class names their
// models): the CC mode the nodes' GPUs are in and how many GPUs each
// Node advertises for VMs.
type GPUClass struct {
	Class string `json:"class"`
	Nodes int    `json:"nodes"`
	// CCModes counts the nodes per CC mode of their GPUs (on, ppcie,
	// devtools, off, mixed, unknown; "" for GPUs without one), most
	// common first.
	CCModes []ValueCount `json:"ccModes"`
	// Passthrough counts the nodes per number of passthrough GPUs their
	// Node advertises (nvidia.com/pgpu or a per-model name), most common
	// first.
	Passthrough []ValueCount `json:"passthrough"`
}

// gpuClasses summarises the GPUs of every class with GPU nodes, by class.
func gpuClasses(nodes []Node) []GPUClass {
	by := map[string]*GPUClass{}
	counts := map[string][2]map[string]int{}
	for i := range nodes {
		n := &nodes[i]
		pass, ok := n.Facts[factPassthrough]
		if !ok {
			continue
		}
		c, ok := by[n.Class]
		if !ok {
			c = &GPUClass{Class: n.Class}
			by[n.Class] = c
			counts[n.Class] = [2]map[string]int{{}, {}}
		}
		c.Nodes++
		counts[n.Class][0][n.Facts[factCCMode]]++
		counts[n.Class][1][pass]++
	}
	out := make([]GPUClass, 0, len(by))
	for class, c := range by {
		c.CCModes, c.Passthrough = valueCounts(counts[class][0]), valueCounts(counts[class][1])
		out = append(out, *c)
	}
	slices.SortFunc(out, func(x, y GPUClass) int { return cmp.Compare(x.Class, y.Class) })
	return out
}

// valueCounts lists the values of a count map, most common first, then
// by value.
func valueCounts(m map[string]int) []ValueCount {
	vc := make([]ValueCount, 0, len(m))
	for v, n := range m {
		vc = append(vc, ValueCount{Value: v, Nodes: n})
	}
	slices.SortFunc(vc, func(x, y ValueCount) int {
		if c := cmp.Compare(y.Nodes, x.Nodes); c != 0 {
			return c
		}
		return cmp.Compare(x.Value, y.Value)
	})
	return vc
}

// writeGPUText prints the GPU classes; nothing in a fleet without GPUs.
func writeGPUText(w io.Writer, a *Analysis) {
	if len(a.GPUs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nGPUs per hardware class (nodes in parentheses; CC mode read from each GPU, passthrough GPUs the Node advertises):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tNODES\tCC MODE\tPASSTHROUGH GPUS")
	for _, c := range a.GPUs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", c.Class, c.Nodes, onNodes(c.CCModes, "none"), onNodes(c.Passthrough, ""))
	}
	tw.Flush()
}

// onNodes renders value counts as "on (3), off (1)": the value, then
// how many nodes have it; an empty value shows as absent.
func onNodes(vc []ValueCount, absent string) string {
	parts := make([]string, len(vc))
	for i, v := range vc {
		parts[i] = fmt.Sprintf("%s (%d)", cmp.Or(v.Value, absent, "(absent)"), v.Nodes)
	}
	return strings.Join(parts, ", ")
}
