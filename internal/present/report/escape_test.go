package report

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/present/output"
	"berth.dev/berth/platform"
)

// TestTableEscapesHostStrings renders, in colour as on a terminal, a
// report whose host strings and plug-in finding (title, message, evidence,
// remedy) hold escape sequences: only berth's own colours may reach the
// terminal, everything the host provided is shown escaped.
func TestTableEscapesHostStrings(t *testing.T) {
	const evil = "\x1b[31mred\x1b[0m \x1b[2J\x1b]8;;http://x\x07link\x07 \x7f\xff \u009b1m"
	p, err := platform.Parse("kubeadm-qemu-none")
	if err != nil {
		t.Fatal(err)
	}
	fd := check.Finding{Outcome: &check.Outcome{
		ID: "plugin.site" + evil, Title: "site check " + evil, Raw: check.Fail,
		Message:  "message " + evil,
		Evidence: []check.Evidence{{Field: "plugins." + evil, Value: "value " + evil}},
		Remedy:   "remedy " + evil,
	}, Status: check.Fail, Severity: check.Blocking}
	rep := &Report{
		Header: Header{Host: Host{Root: "/host" + evil, CPU: "AMD EPYC" + evil, Distribution: "kubeadm" + evil}},
		Verdicts: []check.Verdict{{
			Platform: p.String(), Status: check.NotReady, BlockedBy: fd.ID, Remedy: fd.Remedy,
			Findings: []check.Finding{fd},
		}},
	}
	style := Style{Color: true}
	sgr := regexp.MustCompile(`\x1b\[[0-9;]*m`)
	for name, table := range map[string]func(io.Writer) error{
		"detail": func(w io.Writer) error { return WriteDetail(w, rep, style) },
		"matrix": func(w io.Writer) error { return WriteMatrix(w, rep, []platform.Platform{p}, style) },
	} {
		var buf bytes.Buffer
		if err := output.RenderStyled(&buf, output.Table, rep, table); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		// berth's own colours are there, and they are all there is.
		if !strings.Contains(out, ansiRed) {
			t.Errorf("%s: berth's colours are gone:\n%q", name, out)
		}
		for _, m := range sgr.FindAllString(out, -1) {
			switch m {
			case ansiReset, ansiRed, ansiGreen, ansiYellow, ansiBlue, ansiBold:
			default:
				t.Errorf("%s: a style sequence berth does not use: %q", name, m)
			}
		}
		rest := sgr.ReplaceAllString(out, "")
		if strings.ContainsAny(rest, "\x1b\x07\x7f\u009b") || !strings.Contains(rest, `\x1b[31mred\x1b[0m`) {
			t.Errorf("%s: host strings not escaped:\n%s", name, out)
		}
	}
}
