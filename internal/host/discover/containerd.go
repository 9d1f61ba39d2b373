package discover

import (
	"io/fs"
	"path"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/platform"
)

// containerdFacts reports containerd as the distribution runs it, or nil
// when there is no sign of containerd (no binary, config, template or
// socket).
func containerdFacts(s *session, distribution string, bins []facts.Binary) *facts.ContainerRuntime {
	const field = "runtimes.containerd"
	name, l, ok := s.customLayout(platform.Containerd)
	if !ok {
		name, l, ok = layoutFor(distribution, platform.Containerd)
	}
	if !ok {
		return nil
	}
	bin := runtimeBinary(bins, "containerd")
	template := ""
	for _, t := range []string{l.TemplateV3, l.Template} {
		if t != "" && s.exists(t) {
			template = t
			break
		}
	}
	configExists := s.exists(l.Config)
	socketExists := l.Socket != "" && s.exists(l.Socket)
	if bin == nil && !configExists && template == "" && !socketExists {
		return nil
	}
	r := &facts.ContainerRuntime{
		Layout:       name,
		ConfigPath:   l.Config,
		ConfigExists: configExists,
		Template:     template,
		Socket:       l.Socket,
		SocketExists: socketExists,
	}
	fillBinary(s, r, field, bin)
	if !configExists {
		// containerd runs on built-in defaults without a config; on k3s,
		// RKE2 and microk8s the config is rendered when the service starts.
		return r
	}

	// k0s loads its drop-in directory itself; containerd's imports cover
	// the rest.
	var dropIns []string
	if l.DropIn == platform.DropInDirectory && l.DropInDir != "" {
		dropIns, _ = fs.Glob(s.root.FS(), path.Join(l.DropInDir, "*.toml"))
	}
	loaded := runtimecfg.LoadContainerd(s.root.FS(), l.Config, dropIns)
	readReason := configErrors(s, r, field, loaded.Errors)
	if readReason != "" || r.ConfigError != "" {
		// A file missing from the merge may configure snapshotters too.
		s.unknownf(field+".snapshotters", "%s", orReason(readReason, facts.ReasonUnparseable+": "+r.ConfigError))
		s.unknownf(field+".cdiEnabled", "%s", orReason(readReason, facts.ReasonUnparseable+": "+r.ConfigError))
	}
	c := loaded.Config
	if c == nil {
		s.unknownf(field+".configVersion", "%s", orReason(readReason, facts.ReasonUnparseable+": "+l.Config))
		return r
	}
	r.ConfigVersion = c.Version
	r.Imports = c.Imports
	if len(loaded.Files) > 1 {
		r.DropIns = loaded.Files[1:]
	}
	r.Handlers = handlerFacts(c.Handlers)
	r.DefaultHandler = c.DefaultRuntime
	r.DefaultSnapshotter = c.Snapshotter
	r.DevmapperPool = c.DevmapperPool
	r.CDIEnabled = c.EnableCDI
	if c.Snapshotter != "" {
		r.Snapshotters = append(r.Snapshotters, c.Snapshotter)
	}
	for _, sn := range c.Snapshotters() {
		if sn != c.Snapshotter {
			r.Snapshotters = append(r.Snapshotters, sn)
		}
	}
	for _, m := range c.Misplaced {
		r.IgnoredHandlers = append(r.IgnoredHandlers, m.String())
	}
	return r
}

// customLayout is the runtime layout the user gave for a custom
// distribution (Options.Layout), named "custom", when it is rt's.
func (s *session) customLayout(rt platform.Runtime) (string, platform.Layout, bool) {
	if l := s.opt.Layout; l != nil && l.Runtime == rt {
		return platform.Custom.String(), *l, true
	}
	return "", platform.Layout{}, false
}

// orReason is reason, or def when reason is empty.
func orReason(reason, def string) string {
	if reason != "" {
		return reason
	}
	return def
}
