package report

import (
	"fmt"
	"io"
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// Width is the terminal width the text output fits.
const Width = 80

// Style says how to decorate text output: colour and symbols only on a
// terminal that allows colour.
type Style struct {
	Color bool
}

const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiBold   = "\x1b[1m"
)

func (s Style) paint(color, text string) string {
	if !s.Color {
		return text
	}
	return color + text + ansiReset
}

// status renders a finding status: the word, coloured (with a symbol) on a
// terminal.
func (s Style) status(st check.Status) string {
	word := strings.ToUpper(st.String())
	if !s.Color {
		return word
	}
	switch st {
	case check.Pass:
		return s.paint(ansiGreen, "✔ "+word)
	case check.Fail:
		return s.paint(ansiRed, "✖ "+word)
	case check.Warn:
		return s.paint(ansiYellow, "! "+word)
	case check.Unknown:
		return s.paint(ansiBlue, "? "+word)
	}
	return "- " + word
}

func (s Style) verdict(v check.VerdictStatus) string {
	word := strings.ReplaceAll(string(v), "-", " ")
	if !s.Color {
		return word
	}
	switch v {
	case check.Ready:
		return s.paint(ansiGreen, "✔ "+word)
	case check.ReadyWithWarnings:
		return s.paint(ansiYellow, "! "+word)
	}
	return s.paint(ansiRed, "✖ "+word)
}

// visibleLen is the width of s on screen, ignoring ANSI escapes.
func visibleLen(s string) int {
	n, esc := 0, false
	for _, r := range s {
		switch {
		case esc:
			if r == 'm' {
				esc = false
			}
		case r == '\x1b':
			esc = true
		default:
			n++
		}
	}
	return n
}

// esc escapes one host-provided value (a title, an ID, a path) for the
// text output: no control character or escape sequence in it reaches the
// terminal (output.Escape). The text output is written through an
// output.EscapeWriter that lets only berth's own colours through, which
// cannot tell a host's ESC[31m from berth's: every host string is escaped
// here, before it is painted or wrapped.
func esc(s string) string { return output.Escape(s) }

// escText escapes host-provided text for wrap, which breaks lines at
// whitespace anyway: newlines and tabs in it stay word breaks instead of
// showing as \n.
func escText(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r >= 0x7f }) {
		return s
	}
	return strings.Join(mapStrings(strings.Fields(s), esc), " ")
}

func mapStrings(ss []string, f func(string) string) []string {
	for i, s := range ss {
		ss[i] = f(s)
	}
	return ss
}

// wrap writes text wrapped to Width with the given indent; the first line
// starts with first (already indented) instead of indent. A report wraps
// every finding's text: each line is built once in a buffer, with its
// visible width kept as words are added, and written whole.
func wrap(w io.Writer, first, indent, text string) {
	var arr [2 * Width]byte
	line := append(arr[:0], first...)
	width := visibleLen(first)
	empty := true
	for word := range strings.FieldsSeq(text) {
		ww := visibleLen(word)
		if !empty && width+1+ww > Width {
			w.Write(append(line, '\n'))
			line, width, empty = append(line[:0], indent...), visibleLen(indent), true
		}
		if !empty {
			line = append(line, ' ')
			width++
		}
		line = append(line, word...)
		width += ww
		empty = false
	}
	if !empty || string(line) != indent {
		w.Write(append(line, '\n'))
	}
}

// header prints what host was inspected.
func header(w io.Writer, r *Report, s Style) {
	where := "offline root " + r.Host.Root
	if r.Host.Live {
		where = "live host"
	}
	parts := []string{where}
	if r.Host.Distribution != "" {
		parts = append(parts, r.Host.Distribution)
	} else {
		parts = append(parts, "no Kubernetes distribution detected")
	}
	if r.Host.CPU != "" {
		parts = append(parts, r.Host.CPU)
	}
	switch {
	case r.Host.Guest == nil:
	case *r.Host.Guest:
		parts = append(parts, "VM guest ("+orUnknown(r.Host.Hypervisor)+")")
	default:
		parts = append(parts, "bare metal")
	}
	wrap(w, s.paint(ansiBold, "berth check")+": ", "  ", escText(strings.Join(parts, ", ")))
	fmt.Fprintf(w, "  facts %s\n", r.FactsDigest)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// WriteDetail prints the full check tree of every verdict, one line per
// check in the spirit of virt-host-validate, with message, evidence and
// remedy beneath everything that did not pass.
func WriteDetail(w io.Writer, r *Report, s Style) error {
	header(w, r, s)
	for _, v := range r.Verdicts {
		fmt.Fprintln(w)
		line := esc(v.Platform) + ": " + strings.ToUpper(s.verdict(v.Status))
		if v.BlockedBy != "" {
			line += " (blocked by " + esc(v.BlockedBy) + ")"
		}
		wrap(w, s.paint(ansiBold, "Platform ")+"", "  ", line)
		for _, fd := range treeOrder(v.Findings) {
			indent := strings.Repeat("  ", 1+min(fd.Depth, 3))
			st := s.status(fd.Status)
			label := indent + "Checking " + esc(fd.Title) + " "
			room := Width - visibleLen(st) - 1
			if visibleLen(label) > room-3 {
				label = truncate(label, room-4) + "… "
			}
			fmt.Fprintf(w, "%s%s %s\n", label, strings.Repeat(".", max(room-visibleLen(label), 3)), st)
			if fd.Status == check.Pass || fd.Status == check.Skip {
				continue
			}
			sub := indent + "    "
			wrap(w, indent+"  "+esc(fd.ID)+": ", sub, escText(fd.Message))
			for _, e := range fd.Evidence {
				wrap(w, sub+"evidence: ", sub+"  ", escText(e.Field+" = "+e.Value))
			}
			if fd.Ignored {
				wrap(w, sub, sub, "(failure ignored with --ignore)")
			}
			if fd.Remedy != "" && fd.Status != check.Pass {
				wrap(w, sub+"fix: ", sub+"  ", escText(fd.Remedy))
			}
		}
	}
	return nil
}

// treeOrder puts every finding right after its parent (depth first),
// keeping catalogue order among siblings.
func treeOrder(fs []check.Finding) []check.Finding {
	children := map[string][]int{}
	present := map[string]bool{}
	for _, fd := range fs {
		present[fd.ID] = true
	}
	var roots []int
	for i, fd := range fs {
		if fd.Parent != "" && present[fd.Parent] {
			children[fd.Parent] = append(children[fd.Parent], i)
		} else {
			roots = append(roots, i)
		}
	}
	out := make([]check.Finding, 0, len(fs))
	var walk func(i int)
	walk = func(i int) {
		out = append(out, fs[i])
		for _, c := range children[fs[i].ID] {
			walk(c)
		}
	}
	for _, r := range roots {
		walk(r)
	}
	return out
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:max(n, 0)])
}

// family groups platforms in the matrix by hypervisor and TEE.
func family(p platform.Platform) string {
	name := p.Hypervisor().Display()
	if p.Confidential() {
		name += " + " + p.TEE().Display()
	}
	if p.Distribution() != platform.DefaultDistribution() {
		name = p.Distribution().String() + ": " + name
	}
	return name
}

// isBase reports whether p is shown as a row of the matrix: variants (debug,
// a snapshotter other than the default) follow their base and are only
// mentioned when their verdict differs.
func isBase(p platform.Platform) bool {
	return !p.Debug() && p.Snapshotter() == p.DefaultSnapshotter()
}

// baseSpec is the Spec of the row p follows (isBase): p without the
// debug variant, on its default snapshotter. The rows are looked up by
// it rather than by the name of a platform built again (platform.New
// validates and names it, for every variant of the matrix).
func baseSpec(p platform.Platform) platform.Spec {
	s := p.Spec()
	s.Debug, s.Snapshotter = false, p.DefaultSnapshotter()
	return s
}

// WriteMatrix prints one row per base platform grouped by family with its
// verdict and first blocking check, then why the not-ready platforms are
// blocked (grouped by blocker, with the remedy), then every check that
// failed or warned, grouped by check.
func WriteMatrix(w io.Writer, r *Report, ps []platform.Platform, s Style) error {
	if len(ps) != len(r.Verdicts) {
		return fmt.Errorf("report: %d platforms for %d verdicts", len(ps), len(r.Verdicts))
	}
	header(w, r, s)
	base := map[platform.Spec]int{}
	var rows []int
	for i, p := range ps {
		if isBase(p) {
			base[p.Spec()] = i
			rows = append(rows, i)
		}
	}
	// Variants whose verdict differs from their base, by base.
	variants := map[int][]int{}
	for i, p := range ps {
		if isBase(p) {
			continue
		}
		b, ok := base[baseSpec(p)]
		if !ok {
			rows = append(rows, i)
			continue
		}
		if r.Verdicts[i].Status != r.Verdicts[b].Status || r.Verdicts[i].BlockedBy != r.Verdicts[b].BlockedBy {
			variants[b] = append(variants[b], i)
		}
	}
	nameW := 20
	for _, i := range rows {
		nameW = max(nameW, len(ps[i].String())+2)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-*s %-21s %s\n", nameW+2, "PLATFORM", "VERDICT", "FIRST BLOCKER")
	fam := ""
	for _, i := range orderRows(rows, ps) {
		p, v := ps[i], r.Verdicts[i]
		if f := family(p); f != fam {
			fam = f
			fmt.Fprintln(w, s.paint(ansiBold, fam))
		}
		matrixRow(w, nameW, "  "+p.String(), v, s)
		for _, j := range variants[i] {
			matrixRow(w, nameW, "    "+strings.TrimPrefix(ps[j].String(), p.String()), r.Verdicts[j], s)
		}
	}
	hidden := len(ps) - len(rows)
	if hidden > 0 {
		fmt.Fprintf(w, "(%d debug and snapshotter variants follow their base platform unless listed)\n", hidden)
	}
	writeBlockers(w, r, rows, s)
	writeFindings(w, r, rows, s)
	return nil
}

func orderRows(rows []int, ps []platform.Platform) []int {
	// Stable grouping by family in first-seen order.
	var fams []string
	by := map[string][]int{}
	for _, i := range rows {
		f := family(ps[i])
		if _, ok := by[f]; !ok {
			fams = append(fams, f)
		}
		by[f] = append(by[f], i)
	}
	out := make([]int, 0, len(rows))
	for _, f := range fams {
		out = append(out, by[f]...)
	}
	return out
}

func matrixRow(w io.Writer, nameW int, name string, v check.Verdict, s Style) {
	verdict := s.verdict(v.Status)
	pad := 21 - visibleLen(verdict)
	blocker := esc(v.BlockedBy)
	room := Width - (nameW + 2 + 1 + 21 + 1)
	if len(blocker) > room {
		blocker = truncate(blocker, room-1) + "…"
	}
	fmt.Fprintf(w, "%-*s %s%s %s\n", nameW+2, name, verdict, strings.Repeat(" ", max(pad, 1)), blocker)
}

func writeBlockers(w io.Writer, r *Report, rows []int, s Style) {
	type group struct {
		id, msg, remedy string
		n               int
	}
	var groups []*group
	by := map[string]*group{}
	for _, i := range rows {
		v := r.Verdicts[i]
		if v.Status != check.NotReady {
			continue
		}
		msg := ""
		for _, fd := range v.Findings {
			if fd.ID == v.BlockedBy {
				msg = fd.Message
				break
			}
		}
		key := v.BlockedBy + "\x00" + msg
		g := by[key]
		if g == nil {
			g = &group{id: v.BlockedBy, msg: msg, remedy: v.Remedy}
			by[key] = g
			groups = append(groups, g)
		}
		g.n++
	}
	if len(groups) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, s.paint(ansiBold, "Why not ready"))
	for _, g := range groups {
		wrap(w, "  "+s.paint(ansiRed, esc(g.id))+" ("+plural(g.n, "platform")+"): ", "      ", escText(g.msg))
		if g.remedy != "" {
			wrap(w, "    fix: ", "      ", escText(g.remedy))
		}
	}
}

func writeFindings(w io.Writer, r *Report, rows []int, s Style) {
	type group struct {
		id, msg string
		status  check.Status
		n       int
	}
	// Keyed by the three fields, not by a string made of them: every
	// finding of every platform shown is looked up.
	type key struct {
		status  check.Status
		id, msg string
	}
	var groups []*group
	by := map[key]*group{}
	skipped := 0
	for _, i := range rows {
		for _, fd := range r.Verdicts[i].Findings {
			switch fd.Status {
			case check.Pass:
				continue
			case check.Skip:
				skipped++
				continue
			}
			k := key{fd.Status, fd.ID, fd.Message}
			g := by[k]
			if g == nil {
				g = &group{id: fd.ID, msg: fd.Message, status: fd.Status}
				by[k] = g
				groups = append(groups, g)
			}
			g.n++
		}
	}
	if len(groups) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, s.paint(ansiBold, "Checks that failed, warned or could not tell"))
	for _, st := range []check.Status{check.Fail, check.Warn, check.Unknown} {
		for _, g := range groups {
			if g.status != st {
				continue
			}
			on := "on " + plural(g.n, "platform")
			if g.n == len(rows) {
				on = "on every platform shown"
			}
			wrap(w, "  "+s.status(st)+" "+esc(g.id)+" ("+on+"): ", "      ", escText(g.msg))
		}
	}
	if skipped > 0 {
		fmt.Fprintf(w, "  (%s skipped because a prerequisite failed)\n", plural(skipped, "check result"))
	}
	fmt.Fprintln(w, "  details: berth check --platform NAME; about a check: berth check explain ID")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Wrap writes text wrapped to Width: the first line starts with first, the
// following ones with indent.
func Wrap(w io.Writer, first, indent, text string) { wrap(w, first, indent, text) }
