package discover

import (
	"context"
	"path"
	"path/filepath"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/plugin"
)

// runPlugins fills f.Plugins: feature files on every root (they are data,
// read like any other file), executable checks only when the operator
// enabled them and only on the live "/" root, never from a snapshot or
// fixture.
func runPlugins(ctx context.Context, s *session, f *facts.Facts) {
	now := time.Now
	if s.opt.Now != nil {
		now = s.opt.Now
	}
	feats := plugin.LoadFeatures(s.root.FS(), plugin.FeaturesDir, now())
	p := &f.Plugins
	p.Features, p.FeatureSources = feats.Features, feats.Sources
	p.Errors = append(p.Errors, feats.Errors...)
	p.Notes = append(p.Notes, feats.Notes...)

	if !s.opt.ExecPlugins {
		return
	}
	const field = "plugins.findings"
	switch {
	case !s.root.Live():
		s.unknownf(field, "%s: executable checks never run from an offline root", facts.ReasonOffline)
	case s.root.Path() != "/":
		s.unknownf(field, "%s: executable checks run only on the live / root", facts.ReasonNotRun)
	default:
		s.runChecks(ctx, p, filepath.Join(s.root.Path(), plugin.ChecksDir))
	}
}

// runChecks runs the executable checks of dir (a path on this machine) and
// merges their facts (over the feature files', in lexical order), findings
// and errors into p.
func (s *session) runChecks(ctx context.Context, p *facts.Plugins, dir string) {
	results, err := plugin.RunChecks(ctx, dir, plugin.Options{Timeout: s.opt.PluginTimeout})
	if err != nil {
		p.Errors = append(p.Errors, facts.PluginError{Name: path.Base(plugin.ChecksDir), Message: err.Error()})
		return
	}
	for _, r := range results {
		if r.Err != nil {
			p.Errors = append(p.Errors, facts.PluginError{Name: r.Name, Message: "check " + path.Join(plugin.ChecksDir, r.Name) + ": " + r.Err.Error()})
		}
		for k, v := range r.Output.Facts {
			if p.Features == nil {
				p.Features, p.FeatureSources = map[string]string{}, map[string]string{}
			}
			p.Features[k], p.FeatureSources[k] = v, path.Join(plugin.ChecksDir, r.Name)
		}
		for _, fd := range r.Output.Findings {
			p.Findings = append(p.Findings, facts.PluginFinding{
				Plugin: r.Name, ID: fd.ID, Status: fd.Status,
				Title: fd.Title, Message: fd.Message, Remedy: fd.Remedy,
			})
		}
	}
}
