package fleet

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// maxListed is how many node names a group or split lists before "and N
// more": a fleet of thousands must still fit on a screen.
const maxListed = 8

// GroupID is the short name of group i in the text and HTML views.
func GroupID(i int) string { return fmt.Sprintf("G%d", i+1) }

// cell is the short form of a verdict in the matrix.
func cell(v string) string {
	switch v {
	case Ready:
		return "ready"
	case ReadyWithWarnings:
		return "warn"
	case NotReady:
		return "NO"
	}
	return "-"
}

// NodeList names up to maxListed nodes.
func NodeList(nodes []string) string {
	if len(nodes) <= maxListed {
		return strings.Join(nodes, ", ")
	}
	return strings.Join(nodes[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(nodes)-maxListed)
}

// WriteText prints the fleet view: groups, the platform x group matrix
// with the usable node count per platform, what blocks each group, the
// consistency report and the malformed reports.
func WriteText(w io.Writer, a *Analysis) error {
	bw := &errWriter{w: w}
	fmt.Fprintf(bw, "%d nodes in %d groups (nodes with the same hardware class and verdicts are collapsed)\n\n", a.Nodes, len(a.Groups))
	if len(a.Groups) > 0 {
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tNODES\tCLASS\tMEMBERS")
		for i, g := range a.Groups {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", GroupID(i), len(g.Nodes), g.Class, NodeList(g.Nodes))
		}
		tw.Flush()
		fmt.Fprintln(bw)

		tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
		head := []string{"PLATFORM", "USABLE"}
		for i := range a.Groups {
			head = append(head, GroupID(i))
		}
		fmt.Fprintln(tw, strings.Join(head, "\t"))
		for j, p := range a.Platforms {
			s := a.Summary[j]
			row := []string{p, fmt.Sprintf("%d/%d", s.Usable(), a.Nodes)}
			for _, g := range a.Groups {
				row = append(row, cell(g.Verdicts[j]))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		tw.Flush()

		var blocked []string
		for i, g := range a.Groups {
			by := map[string][]string{}
			var ids []string
			for j, b := range g.BlockedBy {
				if b == "" || g.Verdicts[j] != NotReady {
					continue
				}
				if _, ok := by[b]; !ok {
					ids = append(ids, b)
				}
				by[b] = append(by[b], a.Platforms[j])
			}
			slices.Sort(ids)
			for _, id := range ids {
				blocked = append(blocked, fmt.Sprintf("  %s: %s blocks %d platform(s): %s", GroupID(i), id, len(by[id]), shortList(by[id], 4)))
			}
		}
		if len(blocked) > 0 {
			fmt.Fprintln(bw, "\nFirst blockers (berth check explain ID tells more):")
			for _, l := range blocked {
				fmt.Fprintln(bw, l)
			}
		}
	}

	writeGPUText(bw, a)
	writeInstallText(bw, a)
	writeConditionsText(bw, a)

	fmt.Fprintln(bw, "\nConsistency (facts that differ from the majority of the node's hardware class):")
	if len(a.Outliers) == 0 && len(a.Splits) == 0 {
		fmt.Fprintln(bw, "  every hardware class is uniform")
	}
	for _, o := range a.Outliers {
		fmt.Fprintf(bw, "  %s [%s]: %s is %s; %d of %d nodes have %s\n", o.Node, o.Class, o.Fact, shown(o.Value), o.MajorityCount, o.ClassSize, shown(o.Majority))
	}
	for _, s := range a.Splits {
		parts := make([]string, len(s.Values))
		for i, v := range s.Values {
			parts[i] = fmt.Sprintf("%s on %d", shown(v.Value), v.Nodes)
		}
		fmt.Fprintf(bw, "  [%s]: no majority for %s: %s\n", s.Class, s.Fact, strings.Join(parts, ", "))
	}
	if len(a.Malformed) > 0 {
		fmt.Fprintf(bw, "\nMalformed NodeReports (%d, left out above):\n", len(a.Malformed))
		for _, m := range a.Malformed {
			fmt.Fprintf(bw, "  %s: %s\n", m.Name, m.Reason)
		}
	}
	return bw.err
}

// maxFailures is how many failed installs the text view lists; -o json
// lists them all.
const maxFailures = 20

// writeInstallText prints the node-installer's outcomes per platform and
// the failed installs with their errors; nothing when no node reports a
// node-installer run.
func writeInstallText(w io.Writer, a *Analysis) {
	if a.InstallNodes == 0 {
		return
	}
	fmt.Fprintf(w, "\nInstall status (node-installer; %d of %d nodes report a run):\n", a.InstallNodes, a.Nodes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PLATFORM\tINSTALLED\tNOT-READY\tFAILED\tRELEASES")
	for _, s := range a.Install {
		rel := make([]string, len(s.Releases))
		for i, r := range s.Releases {
			rel[i] = fmt.Sprintf("%s on %d", shown(r.Value), r.Nodes)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", s.Platform, s.Installed, s.NotReady, s.Failed, cmp.Or(strings.Join(rel, ", "), "-"))
	}
	tw.Flush()
	if len(a.InstallFailures) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFailed installs (%d; kubectl describe node NODE shows the BerthInstallFailed Event):\n", len(a.InstallFailures))
	for i, f := range a.InstallFailures {
		if i == maxFailures {
			fmt.Fprintf(w, "  and %d more (berth fleet -o json lists them all)\n", len(a.InstallFailures)-maxFailures)
			break
		}
		rel := ""
		if f.Release != "" {
			rel = " (" + f.Release + ")"
		}
		fmt.Fprintf(w, "  %s: %s%s: %s\n", f.Node, f.Platform, rel, oneLine(f.Error))
	}
}

// oneLine keeps an error on its line of the view.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func shortList(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, ", ")
	}
	return strings.Join(s[:n], ", ") + fmt.Sprintf(" and %d more", len(s)-n)
}

// shown prints an absent value visibly.
func shown(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}

// errWriter keeps the first write error so that the printing code stays
// readable.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, nil
}
