package discover

import (
	"errors"
	"io/fs"
	"path"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/runtimecfg"
)

// kataGuests fills each handler's Kata guest (kernel, image, initrd) from
// the Kata configuration the handler names. The +gpu platforms need
// NVIDIA's guest kernel and image; nothing else shows which one a handler
// boots.
func kataGuests(s *session, rt *facts.ContainerRuntime) {
	if rt == nil {
		return
	}
	for i := range rt.Handlers {
		if p := rt.Handlers[i].ConfigPath; p != "" {
			rt.Handlers[i].Kata = kataGuest(s, p)
		}
	}
}

// kataGuest reads the Kata configuration file p (absolute in the root)
// and the *.toml drop-ins of config.d beside it, in name order, as Kata's
// runtime does: a later file's key wins.
func kataGuest(s *session, p string) *facts.KataGuest {
	out := &facts.KataGuest{}
	file, ok := runtimecfg.FSPath("/", p)
	if !ok {
		out.Error = "path leaves the root: " + p
		return out
	}
	b, err := hostfs.ReadFileLimit(s.root.FS(), file, 0)
	if err != nil {
		out.Error = ReadReason(p, err)
		return out
	}
	g, err := runtimecfg.ParseKataGuest(p, b)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	dir := path.Join(path.Dir(file), "config.d")
	ents, err := s.root.FS().ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		out.Error = ReadReason("/"+dir, err)
		return out
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".toml") {
			continue
		}
		dp := path.Join(dir, e.Name())
		b, err := hostfs.ReadFileLimit(s.root.FS(), dp, 0)
		if err != nil {
			out.Error = ReadReason("/"+dp, err)
			return out
		}
		d, err := runtimecfg.ParseKataGuest("/"+dp, b)
		if err != nil {
			out.Error = err.Error()
			return out
		}
		g = g.Merge(d)
	}
	out.Hypervisor = g.Hypervisor
	for _, f := range []struct {
		dst *string
		src *string
	}{{&out.Kernel, g.Kernel}, {&out.Image, g.Image}, {&out.Initrd, g.Initrd}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	return out
}
