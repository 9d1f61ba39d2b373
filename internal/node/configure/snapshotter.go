package configure

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"berth.dev/berth/platform"
)

// NydusProxy is the name of berth's nydus-snapshotter proxy plugin in
// containerd's config, and the snapshotter its guest-pull handlers name.
// It is berth's own name rather than kata-deploy's nydus-for-kata-tee, so
// that a node kata-deploy set up is refused (its entry is not berth's)
// instead of silently shared, and remove never takes kata-deploy's away.
// The platform's snapshotter table names it too (SnapshotterSetup.Proxy), for
// the snapshotter.available check; a test holds the two equal.
const NydusProxy = "berth-nydus"

// NydusSocket is where berth's nydus-snapshotter serves containerd.
const NydusSocket = "/run/" + NydusProxy + "/containerd-nydus-grpc.sock"

// NydusUnit is the systemd unit that runs berth's nydus-snapshotter.
const NydusUnit = NydusProxy + "-snapshotter.service"

// NydusBinary is containerd-nydus-grpc relative to berth's prefix.
const NydusBinary = "bin/containerd-nydus-grpc"

// ProxyPlugin is a containerd proxy plugin entry berth writes: apply
// refuses when the node's configs already have one of that name or
// address that berth did not write.
type ProxyPlugin struct {
	Name, Address string
}

// HandlerSnapshotter is the snapshotter p's handler names: berth's nydus
// proxy plugin for nydus, the built-in plugin's name otherwise.
func HandlerSnapshotter(p platform.Platform) string {
	if px := p.Snapshotter().Setup().Proxy; px != "" {
		return px
	}
	return p.Snapshotter().String()
}

// NydusConfigPath is the nydus-snapshotter config berth writes.
func (ps Paths) NydusConfigPath() string {
	return path.Join(ps.Prefix, "etc/nydus", ps.nydus().Name+".toml")
}

// snapshotterFiles are what p's snapshotter needs beyond the handler's
// snapshotter option: for nydus its config, unit and proxy plugin entry
// (placed next to the handler in rt, the runtime files already rendered);
// for erofs a containerd that has the plugin. Overlayfs, devmapper,
// blockfile and tardev need nothing written by berth.
func snapshotterFiles(p platform.Platform, t Target, ps Paths, rt []File) ([]File, error) {
	s := p.Snapshotter()
	if !s.Valid() {
		return nil, fmt.Errorf("snapshotter %v: unknown: expected one of %v", s, platform.Snapshotters())
	}
	if t.Layout.Runtime != platform.Containerd {
		return nil, nil
	}
	st := s.Setup()
	if m := st.MinContainerd; len(m) == 2 {
		need := fmt.Sprintf("%d.%d", m[0], m[1])
		d := parseDaemon(t.Containerd)
		if d.known && (d.major < m[0] || d.major == m[0] && d.minor < m[1]) {
			return nil, refused("snapshotter %s needs containerd %s or later; this node runs containerd %s: choose another snapshotter (+nydus, +overlayfs)", s, need, t.Containerd)
		}
		if m[0] >= 2 && t.ConfigVersion < 3 {
			return nil, refused("snapshotter %s needs containerd %s or later, which reads config version 3; the config to write is version %d", s, need, t.ConfigVersion)
		}
	}
	if st.Proxy == NydusProxy {
		return nydusFiles(p, t, ps, rt)
	}
	return nil, nil
}

func nydusFiles(p platform.Platform, t Target, ps Paths, rt []File) ([]File, error) {
	proxy := ps.nydus()
	var d doc
	d.comment(sharedHeader("containerd proxy plugin "+proxy.Name+" (nydus-snapshotter, guest pull)", t.Facts))
	var pf File
	var handler *File
	for i := range rt {
		if rt[i].Kind == Owned || rt[i].BlockID == ps.Suffix.Block(p) {
			handler = &rt[i]
			break
		}
	}
	if handler == nil {
		return nil, errors.New("nydus: no containerd handler file to place the proxy plugin next to")
	}
	scan := []string{t.Layout.Config}
	if handler.Kind == Owned {
		// Its own drop-in, shared by every nydus platform on the node
		// (identical content), so that no handler's drop-in redefines it.
		d.kv("version", t.ConfigVersion)
		writeProxy(&d, proxy)
		dir := path.Dir(handler.Path)
		pf = File{Path: path.Join(dir, proxy.Name+".toml"), Kind: Owned, Format: "toml", Content: d.bytes(),
			Purpose: "containerd drop-in (proxy plugin " + proxy.Name + ")"}
		scan = append(scan, dir+"/*.toml")
	} else {
		writeProxy(&d, proxy)
		pf = File{Path: handler.Path, Kind: Block, BlockID: "proxy-" + proxy.Name, Where: End, Format: handler.Format,
			Content: d.bytes(), Base: handler.Base, Version: handler.Version,
			Purpose: "containerd config (proxy plugin " + proxy.Name + ")"}
		scan = append(scan, handler.Path)
	}
	pf.Proxy, pf.ScanProxies = proxy, scan

	var c doc
	c.comment(sharedHeader("nydus-snapshotter configuration (proxy mode: the guest pulls images)", nil))
	c.kv("version", 1)
	c.kv("root", "/var/lib/"+proxy.Name)
	c.kv("address", proxy.Address)
	// No nydusd on the host: with the proxy driver the snapshotter only
	// hands Kata the image references and the guest pulls.
	c.kv("daemon_mode", "none")
	c.table("daemon")
	c.kv("fs_driver", "proxy")
	c.table("snapshot")
	c.kv("enable_kata_volume", true)
	cfg := File{Path: strings.TrimPrefix(ps.NydusConfigPath(), "/"), Kind: Owned, Format: "nydus",
		Content: c.bytes(), Purpose: "nydus-snapshotter configuration"}

	unit := File{Path: path.Join("etc/systemd/system", ps.nydusUnit()), Kind: Owned, Format: "systemd",
		Content: nydusUnit(ps), Purpose: "systemd unit of nydus-snapshotter"}
	return []File{cfg, unit, pf}, nil
}

// sharedHeader is header for the files every nydus platform on a node
// shares: the same bytes whichever platform wrote them, so that applying a
// second one changes nothing and removing one keeps them for the other.
func sharedHeader(what string, facts []Fact) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Written by berth for its nydus (guest-pull) platforms: %s.\n", what)
	b.WriteString("Do not edit: `berth config apply` rewrites it, `berth config remove` of the last such platform removes it.\n")
	for _, f := range facts {
		fmt.Fprintf(&b, "Value from this node's facts: %s (%s)\n", f.What, f.Source)
	}
	return b.String()
}

func writeProxy(d *doc, pp *ProxyPlugin) {
	d.table("proxy_plugins", pp.Name)
	d.kv("type", "snapshot")
	d.kv("address", pp.Address)
}

func nydusUnit(ps Paths) []byte {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(sharedHeader("systemd unit of nydus-snapshotter", nil), "\n"), "\n") {
		b.WriteString("# " + l + "\n")
	}
	fmt.Fprintf(&b, `[Unit]
Description=nydus-snapshotter for Kata guest pull (containerd proxy plugin %s)
Before=containerd.service

[Service]
Type=simple
ExecStart=%s --config %s --address %s --log-to-stdout
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target containerd.service
`, ps.nydus().Name, path.Join(ps.Prefix, NydusBinary), ps.NydusConfigPath(), ps.nydus().Address)
	return []byte(b.String())
}

// dirLister is the optional part of FS that lists a directory: the
// proxy-plugin check reads the drop-ins next to berth's.
type dirLister interface {
	ReadDir(name string) ([]fs.DirEntry, error)
}

// checkProxy refuses f's proxy plugin when a config berth did not write
// (or a part of one outside berth's blocks) already has a proxy plugin of
// the same name or address: two entries would make containerd use one of
// them, and remove could not give the node its own back.
func checkProxy(fsys FS, st *State, f File) error {
	if f.Proxy == nil {
		return nil
	}
	var files []string
	for _, s := range f.ScanProxies {
		if path.Base(s) != "*.toml" {
			files = append(files, s)
			continue
		}
		l, ok := fsys.(dirLister)
		if !ok {
			continue
		}
		ents, err := l.ReadDir(path.Dir(s))
		if err != nil {
			continue // no directory, no drop-ins
		}
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".toml") {
				files = append(files, path.Join(path.Dir(s), e.Name()))
			}
		}
	}
	slices.Sort(files)
	for _, name := range slices.Compact(files) {
		if st.owns(name) {
			continue
		}
		data, err := fsys.ReadFile(name)
		if err != nil {
			continue
		}
		for _, id := range Blocks(data) {
			if data, _, err = RemoveBlock(name, data, id); err != nil {
				break
			}
		}
		var c struct {
			ProxyPlugins map[string]struct {
				Type    string `toml:"type"`
				Address string `toml:"address"`
			} `toml:"proxy_plugins"`
		}
		if f.Format == "template" {
			data = stripTemplate(data)
		}
		if err := toml.Unmarshal(data, &c); err != nil {
			continue // the file's own validation reports it
		}
		for n, pp := range c.ProxyPlugins {
			switch {
			case n == f.Proxy.Name:
				return refused("/%s already has a proxy plugin %q that berth did not write: remove it (or the tool that wrote it), then apply again", name, n)
			case pp.Address == f.Proxy.Address:
				return refused("/%s already has proxy plugin %q on %s, the address of berth's %s: remove it, then apply again", name, n, pp.Address, f.Proxy.Name)
			}
		}
	}
	return nil
}

// stripTemplate drops the lines of a containerd template that are Go
// template actions, so that the rest parses as TOML.
func stripTemplate(data []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if !strings.Contains(l, "{{") {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}
