package catalog

import (
	"strings"

	"berth.dev/berth/internal/evaluate/check"
	"berth.dev/berth/internal/host/facts"
)

// pluginID makes a check ID from a plug-in name: lower-case, dots and
// spaces folded to '-', so that "plugin.<name>" stays one dotted segment.
func pluginID(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	name = strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' || r == '/' {
			return '-'
		}
		return r
	}, name)
	return "plugin." + orDefault(name, "unnamed")
}

// pluginChecks turns what host plug-ins reported into checks that apply to
// every platform: an unusable plug-in is a warning, a plug-in finding keeps
// its own status.
func pluginChecks(f *facts.Facts) []check.Check {
	var out []check.Check
	seen := map[string]int{}
	add := func(c check.Check) {
		// Two findings of one plug-in get distinct IDs.
		seen[c.ID]++
		if n := seen[c.ID]; n > 1 {
			c.ID += "." + itoa(n)
		}
		out = append(out, c)
	}
	for _, e := range f.Plugins.Errors {
		r := check.Warned("plug-in could not be used: "+e.Message, "fix or remove the plug-in under /etc/berth", check.Ev("plugins.errors."+e.Name, e.Message))
		add(pluginCheck(pluginID(e.Name), "plug-in "+e.Name, "plugins.errors", check.Warning, r))
	}
	for _, pf := range f.Plugins.Findings {
		id := pluginID(pf.Plugin)
		if sub := strings.ToLower(strings.TrimSpace(pf.ID)); sub != "" && sub != strings.TrimPrefix(id, "plugin.") {
			id += "." + strings.ReplaceAll(sub, " ", "-")
		}
		st, ok := check.ParseStatus(strings.TrimSpace(pf.Status))
		if !ok {
			st = check.Unknown
		}
		r := check.Result{Status: st, Message: orDefault(pf.Message, st.String()), Remedy: orDefault(pf.Remedy, "see the documentation of the plug-in "+pf.Plugin),
			Evidence: []check.Evidence{check.Ev("plugins.findings."+pf.Plugin, pf.ID+": "+pf.Status)}}
		add(pluginCheck(id, orDefault(pf.Title, "site check "+pf.Plugin), "plugins.findings", check.Blocking, r))
	}
	return out
}

// pluginCheck is a check whose result r was made from the plug-in facts
// under reads.
func pluginCheck(id, title, reads string, sev check.Severity, r check.Result) check.Check {
	return check.Check{
		ID: id, Title: title,
		Reads:     []string{reads},
		Why:       "A site-specific check installed on this host under /etc/berth reported this.",
		Platforms: "all (host plug-in)",
		Remedies:  []string{orDefault(r.Remedy, "see the plug-in's documentation")},
		Applies:   check.Always(sev),
		Run:       func(*facts.Facts) check.Result { return r },
	}
}
