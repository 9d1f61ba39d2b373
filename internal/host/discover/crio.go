package discover

import (
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/platform"
)

// crioFacts reports CRI-O, or nil when there is no sign of it (no binary,
// config, drop-in directory or socket).
func crioFacts(s *session, distribution string, bins []facts.Binary) *facts.ContainerRuntime {
	const field = "runtimes.crio"
	name, l, ok := s.customLayout(platform.CRIO)
	if !ok {
		name, l, ok = layoutFor(distribution, platform.CRIO)
	}
	if !ok {
		return nil
	}
	bin := runtimeBinary(bins, "crio")
	configExists := s.exists(l.Config)
	dropInExists := l.DropInDir != "" && s.exists(l.DropInDir)
	socketExists := l.Socket != "" && s.exists(l.Socket)
	if bin == nil && !configExists && !dropInExists && !socketExists {
		return nil
	}
	r := &facts.ContainerRuntime{
		Layout:       name,
		ConfigPath:   l.Config,
		ConfigExists: configExists,
		Socket:       l.Socket,
		SocketExists: socketExists,
	}
	if l.DropInDir != "" {
		r.Imports = []string{l.DropInDir}
	}
	fillBinary(s, r, field, bin)
	loaded := runtimecfg.LoadCRIO(s.root.FS(), l.Config, l.DropInDir)
	configErrors(s, r, field, loaded.Errors)
	for _, f := range loaded.Files {
		if f != l.Config {
			r.DropIns = append(r.DropIns, f)
		}
	}
	c := loaded.Config
	r.Handlers = handlerFacts(c.Handlers)
	r.DefaultHandler = c.DefaultRuntime
	r.DefaultSnapshotter = c.StorageDriver
	return r
}
