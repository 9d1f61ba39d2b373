package configure

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/host/runtimecfg"
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
func (ps Paths) NydusConfigPath() string { return NydusNamesFor(ps).Config }

// NydusNames are every name of berth's nydus-snapshotter on a node: its
// proxy plugin, socket, unit, config, binary and state directory. They
// all come from NydusNamesFor, the one place an install suffix (for
// side-by-side installs) has to change them, so that two installs never
// share a socket, unit or plugin name.
type NydusNames struct {
	// Proxy is the proxy plugin's name in containerd's config and the
	// snapshotter the handlers name.
	Proxy string
	// Socket is where the snapshotter serves containerd.
	Socket string
	// Unit is its systemd unit; UnitPath the unit file relative to the
	// host root.
	Unit, UnitPath string
	// Binary is containerd-nydus-grpc's absolute path on the host (under
	// the prefix); Config its config file's.
	Binary, Config string
	// Root is the snapshotter's state directory.
	Root string
}

// NydusNamesFor are the names of berth's nydus-snapshotter for paths ps.
func NydusNamesFor(ps Paths) NydusNames {
	prefix := ps.DefaultedPrefix()
	// Each suffixed install runs its own snapshotter from its own
	// prefix: with the suffix, NydusProxy, NydusSocket and NydusUnit
	// become berth-nydus-<suffix>, /run/berth-nydus-<suffix>/... and
	// berth-nydus-<suffix>-snapshotter.service.
	proxy := ps.Suffix.Of(NydusProxy)
	unit := proxy + "-snapshotter.service"
	return NydusNames{
		Proxy:    proxy,
		Socket:   "/run/" + proxy + "/containerd-nydus-grpc.sock",
		Unit:     unit,
		UnitPath: path.Join(SystemdUnitDir, unit),
		Binary:   path.Join(prefix, NydusBinary),
		Config:   path.Join(prefix, "etc/nydus", proxy+".toml"),
		Root:     "/var/lib/" + proxy,
	}
}

// SystemdUnitDir is where berth writes the systemd units of the services
// it ships (relative to the host root): the administrator's unit
// directory, which a unit from a package does not use.
const SystemdUnitDir = "etc/systemd/system"

// ServiceUnits are the systemd units among files (host paths relative to
// the root) that berth writes: the services a live apply enables and
// starts before the runtime restarts, and a live remove stops and
// disables.
func ServiceUnits(files []string) []string {
	var out []string
	for _, f := range files {
		if path.Dir(f) == SystemdUnitDir && strings.HasSuffix(f, ".service") {
			out = append(out, path.Base(f))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
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
	switch {
	case st.Proxy == NydusProxy:
		return nydusFiles(p, t, ps, rt)
	}
	return nil, nil
}

// erofs needs nothing written beyond the handler's snapshotter option:
// containerd 2.1+ loads its erofs snapshotter and differ by itself, and
// the erofs snapshotter turns each layer the walking differ unpacks into
// an EROFS blob on commit. Berth does not put the erofs differ first in
// the diff service's list (containerd's docs do, for speed): measured on
// containerd 2.1.9, 2.2.9 and 2.4.2 (TestErofsLive), a differ that did
// not load (2.2+ skips it when mkfs.erofs lacks --tar, as Debian 12's
// erofs-utils 1.5 does) makes the diff service, and with it the CRI
// plugin, fail to load: one missing tool would take every pod on the
// node down.

// sharedPart places a part of containerd's config that every platform of
// one snapshotter shares next to p's handler in rt (the runtime files
// already rendered): its own drop-in (name.toml) when the handler has
// one, else a block of that id at the end of the handler's file. d holds
// its header; body writes the tables.
func sharedPart(p platform.Platform, t Target, ps Paths, rt []File, name, what string, d *doc, body func(d *doc)) (File, error) {
	var handler *File
	for i := range rt {
		if rt[i].Kind == Owned || rt[i].BlockID == ps.block(p) {
			handler = &rt[i]
			break
		}
	}
	if handler == nil {
		return File{}, fmt.Errorf("%s: no containerd handler file to place it next to", what)
	}
	if handler.Kind == Owned {
		// Its own drop-in, identical for every such platform on the
		// node, so that no handler's drop-in redefines it.
		d.kv("version", t.ConfigVersion)
		body(d)
		dir := path.Dir(handler.Path)
		return File{Path: path.Join(dir, name+".toml"), Kind: Owned, Format: "toml", Content: d.bytes(),
			Purpose: "containerd drop-in (" + what + ")", ScanProxies: []string{t.Layout.Config, dir + "/*.toml"}}, nil
	}
	body(d)
	return File{Path: handler.Path, Kind: Block, BlockID: name, Where: End, Format: handler.Format,
		Content: d.bytes(), Base: handler.Base, Version: handler.Version,
		Purpose: "containerd config (" + what + ")", ScanProxies: []string{t.Layout.Config, handler.Path}}, nil
}

func nydusFiles(p platform.Platform, t Target, ps Paths, rt []File) ([]File, error) {
	n := NydusNamesFor(ps)
	proxy := &ProxyPlugin{Name: n.Proxy, Address: n.Socket}
	var d doc
	d.comment(sharedHeader("containerd proxy plugin "+n.Proxy+" (nydus-snapshotter, guest pull)", t.Facts))
	pf, err := sharedPart(p, t, ps, rt, n.Proxy, "proxy plugin "+n.Proxy, &d, func(d *doc) { writeProxy(d, proxy) })
	if err != nil {
		return nil, err
	}
	if pf.Kind == Block {
		pf.BlockID = "proxy-" + n.Proxy
	}
	pf.Proxy = proxy

	var c doc
	c.comment(sharedHeader("nydus-snapshotter configuration (proxy mode: the guest pulls images)", nil))
	c.kv("version", 1)
	c.kv("root", n.Root)
	c.kv("address", n.Socket)
	// No nydusd on the host: with the proxy driver the snapshotter only
	// hands Kata the image references and the guest pulls.
	c.kv("daemon_mode", "none")
	c.table("daemon")
	c.kv("fs_driver", "proxy")
	c.table("snapshot")
	c.kv("enable_kata_volume", true)
	cfg := File{Path: strings.TrimPrefix(n.Config, "/"), Kind: Owned, Format: "nydus",
		Content: c.bytes(), Purpose: "nydus-snapshotter configuration"}

	content, err := nydusUnit(n)
	if err != nil {
		return nil, err
	}
	unit := File{Path: n.UnitPath, Kind: Owned, Format: "systemd",
		Content: content, Purpose: "systemd unit of nydus-snapshotter"}
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

// nydusUnit is the unit file: systemd makes the socket's directory
// (RuntimeDirectory) and removes it when the service stops, so that no
// stale socket outlives the snapshotter. The paths in ExecStart= are
// quoted by systemd's rules (systemdArg): a prefix with a space stays one
// argument, and one with a newline is refused.
func nydusUnit(n NydusNames) ([]byte, error) {
	// A flag value berth cannot write faithfully is the user's to change:
	// a usage error (exit 2), like the other checks of --prefix.
	exe, err := systemdExec(n.Binary)
	if err != nil {
		return nil, errdefs.Usagef("--prefix: %w", err)
	}
	args := []string{exe}
	for _, a := range []string{"--config", n.Config, "--address", n.Socket, "--log-to-stdout"} {
		q, err := systemdArg(a)
		if err != nil {
			return nil, errdefs.Usagef("--prefix: %w", err)
		}
		args = append(args, q)
	}
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(sharedHeader("systemd unit of nydus-snapshotter", nil), "\n"), "\n") {
		b.WriteString("# " + l + "\n")
	}
	// The proxy's name (and with it the runtime directory) is berth's
	// name with a suffix of DNS-label characters: nothing in it is
	// special to systemd.
	fmt.Fprintf(&b, `[Unit]
Description=nydus-snapshotter for Kata guest pull (containerd proxy plugin %s)
Before=containerd.service

[Service]
Type=simple
RuntimeDirectory=%s
ExecStart=%s
Restart=always
RestartSec=1

[Install]
WantedBy=multi-user.target containerd.service
`, n.Proxy, path.Base(path.Dir(n.Socket)), strings.Join(args, " "))
	return []byte(b.String()), nil
}

// systemdExec is the executable path p as the first word of a systemd
// command line. Systemd takes that word literally, with no "$"
// expansion (systemd.service(5)), and refuses one holding a quote or a
// backslash ("Executable name contains special characters"); berth
// refuses "$" too, so that the path means the same to every systemd
// whether or not it expands variables there.
func systemdExec(p string) (string, error) {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return "", fmt.Errorf("%q: systemd runs only an absolute, clean executable path", p)
	}
	if i := strings.IndexAny(p, "\"'\\$"); i >= 0 {
		return "", fmt.Errorf("%q: systemd cannot run an executable whose path holds %q", p, p[i])
	}
	return systemdArg(p)
}

// systemdArg is s as one argument of a systemd command line
// (systemd.service(5) "COMMAND LINES", systemd.syntax(7) "QUOTING"): as is
// when every byte is one systemd takes literally, else in double quotes
// with backslash and quote escaped, "$" written "$$" (no variable
// expansion) and "%" written "%%" (no specifier). A control character
// cannot be quoted on a line-based format, so it is refused.
func systemdArg(s string) (string, error) {
	if err := platform.CheckText(s); err != nil {
		return "", err
	}
	safe := s != ""
	for i := 0; i < len(s) && safe; i++ {
		c := s[i]
		safe = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("/._+:,=-", c) >= 0
	}
	if safe {
		return s, nil
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", "$$", "%", "%%")
	return `"` + r.Replace(s) + `"`, nil
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
		if runtimecfg.CheckBounds(name, data) != nil || toml.Unmarshal(data, &c) != nil {
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
