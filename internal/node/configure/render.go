// Package configure renders and applies the runtime configuration of a
// platform on a node: the Kata configuration, the containerd or CRI-O
// handler hooked in the way the node's distribution supports, and the
// RuntimeClass. Rendering is pure (platform + target in, files out); apply
// and remove write under a host root, atomically, with backups and a state
// file recording what berth owns.
package configure

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/platform"
)

// Target is what the node offers a platform: the distribution's runtime
// layout and, for containerd, the config version its containerd reads. It
// is filled from the node's facts (or from flags), never from the platform.
type Target struct {
	// LayoutName is the platform.Layouts key ("kubeadm", "k3s", ...).
	LayoutName string
	Layout     platform.Layout
	// ConfigVersion is the containerd config version to write handlers
	// for: 2 (io.containerd.grpc.v1.cri; containerd 1.x, and 2.x migrating
	// an old file), 3 or 4 (io.containerd.cri.v1.runtime; containerd 2.0-2.2
	// and 2.3 on). Unused for CRI-O.
	ConfigVersion int
	// Containerd is the node's containerd version ("1.6.20~ds1", "2.1.9"),
	// empty when unknown: whether the daemon keeps its built-in runc once a
	// runtime is named depends on it (containerd.go).
	Containerd string
	// Imports are the `imports` entries of containerd's main config as
	// written (from the node's facts); the drop-in goes where they already
	// point when they can.
	Imports []string
	// Facts are the values taken from the node, each with where it came
	// from, for the header of every rendered file.
	Facts []Fact
}

// Fact is one value taken from the node's facts rather than the platform.
type Fact struct {
	What   string // e.g. "containerd config version 3"
	Source string // e.g. "runtimes.containerd.version = 2.0.0"
}

// Kind says how berth owns a file.
type Kind string

const (
	// Owned files are berth's entirely: created by apply, deleted by remove.
	Owned Kind = "owned"
	// Block files belong to someone else (or are shared by several
	// platforms): berth owns one marked block in them, and the first
	// change backs the file up so that removing the last block restores it
	// byte for byte.
	Block Kind = "block"
)

// File is one file a platform needs on the host.
type File struct {
	// Path is relative to the host root.
	Path string `json:"path"`
	Kind Kind   `json:"kind"`
	// Content is the whole file (Owned) or the block body (Block).
	Content []byte `json:"-"`
	// BlockID names the block (Block only); Where is where it goes.
	BlockID string `json:"block,omitempty"`
	Where   Where  `json:"-"`
	// Base is the content to start from when a Block file does not exist
	// yet (e.g. k3s' `{{ template "base" . }}`).
	Base []byte `json:"-"`
	// SkipIfImports, for the imports block, is the drop-in it exists for:
	// nothing is added when the file's own imports already load it.
	SkipIfImports string `json:"-"`
	// Import, for the imports block, is the entry berth adds to the file's
	// own `imports` (the block then replaces that key; Content is the block
	// for a file without the key).
	Import string `json:"-"`
	// When says whether a Block is needed at all, judged on the file as it
	// is without the block.
	When Condition `json:"-"`
	// Version is the containerd config version a handler block is written
	// for (0 for other files): a file of another version is refused.
	Version int `json:"-"`
	// Format is how the file is validated: "toml", or "template" for Go
	// templates that are TOML once rendered (not parsed).
	Format string `json:"format"`
	// Purpose says what the file is for, in messages.
	Purpose string `json:"purpose"`
	// Proxy is the containerd proxy plugin the file defines (nil for
	// most), and ScanProxies the configs (a "DIR/*.toml" for a drop-in
	// directory) apply reads first to refuse an entry of the same name
	// or address that berth did not write.
	Proxy       *ProxyPlugin `json:"-"`
	ScanProxies []string     `json:"-"`
}

// Condition is when a Block is needed.
type Condition uint8

const (
	// Always: the block is the point of the file.
	Always Condition = iota
	// UnlessImported: the imports block, not needed when the file's own
	// imports already load the drop-in (SkipIfImports).
	UnlessImported
	// UnlessDefaultRuntimeDefined: the restated runc of containerd 1.x,
	// not needed when the file defines its default runtime itself.
	UnlessDefaultRuntimeDefined
)

// Rendered is everything a platform needs on one node.
type Rendered struct {
	Platform platform.Platform
	Handler  string
	// Suffix is the install suffix the names derive from.
	Suffix Suffix
	// Layout is the runtime layout of a custom distribution, recorded in
	// the state so that remove and restart need no flags; nil for the
	// distributions whose layout berth knows.
	Layout *platform.Layout
	// Host are the files written on the host by apply, Kata config first.
	Host []File
	// RuntimeClass is the manifest for the cluster (render only).
	RuntimeClass []byte
	// Custom is the custom runtime's name when the handler is one
	// (Paths.Custom), recorded in the state.
	Custom string
	// kataRoot is the directory, relative to the root, every Kata
	// configuration goes under: files there may come and go between two
	// applies of a platform (a drop-in added or dropped moves the file).
	kataRoot string
}

// Options tune rendering.
type Options struct {
	Paths Paths
	// TEELabels adds the NFD TEE labels to the RuntimeClass node selector.
	TEELabels bool
	// Kata is the operator's tuning of the Kata configuration.
	Kata KataOptions
	// ContainerdUserDropIn is the operator's own containerd drop-in
	// (kata-deploy's containerd.userDropIn), written beside berth's
	// (userDropInFile); nil: none.
	ContainerdUserDropIn []byte
}

// ErrUnknownVersion is returned when the containerd config version to
// write is not known.
var ErrUnknownVersion = errors.New("unknown containerd config version")

// Render renders every file p needs on a node described by t.
func Render(p platform.Platform, t Target, opt Options) (*Rendered, error) {
	in, err := opt.Paths.install(p)
	if err != nil {
		return nil, err
	}
	opt.Paths.Prefix = in.Prefix
	// The prefix and the Kata directory were checked with the install;
	// the hypervisor path is the render's own.
	if err := (Paths{Hypervisor: opt.Paths.Hypervisor}).Check(); err != nil {
		return nil, err
	}
	if opt.Paths.Custom != "" {
		if err := CheckCustomName(opt.Paths.Suffix.Of(opt.Paths.Custom)); err != nil {
			return nil, err
		}
	}
	if err := opt.Kata.Check(p); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadKataOptions, err)
	}
	// A drop-in needs a directory of its own (Paths.ownDir); without one
	// the paths stay as they always were.
	opt.Paths.ownDir = opt.Kata.DropIn != nil
	r := &Rendered{Platform: p, Handler: opt.Paths.handler(p), Suffix: opt.Paths.Suffix, Custom: opt.Paths.Custom,
		kataRoot: strings.TrimPrefix(opt.Paths.kataRoot(), "/")}
	if p.Distribution().UserLayout() {
		l := t.Layout
		r.Layout = &l
	}
	r.Host = append(r.Host, File{
		Path: strings.TrimPrefix(opt.Paths.KataConfig(p), "/"), Kind: Owned, Format: "toml",
		Content: kataConfig(p, opt.Paths, opt.Kata), Purpose: "Kata configuration",
	})
	if opt.Kata.DropIn != nil {
		r.Host = append(r.Host, kataDropInFile(p, opt.Paths, opt.Kata))
	}
	var rt []File
	switch t.Layout.Runtime {
	case platform.CRIO:
		rt = []File{crioFile(p, t, opt.Paths)}
	case platform.Containerd:
		rt, err = containerdFiles(p, t, opt.Paths)
	default:
		err = fmt.Errorf("layout %q: no runtime", t.LayoutName)
	}
	if err != nil {
		return nil, err
	}
	snap, err := snapshotterFiles(p, t, opt.Paths, rt)
	if err != nil {
		return nil, err
	}
	// The snapshotter's files go first, so that the proxy plugin is in the
	// config before a handler names it.
	r.Host = append(r.Host, snap...)
	r.Host = append(r.Host, rt...)
	if opt.ContainerdUserDropIn != nil {
		f, err := userDropInFile(t, rt, opt.ContainerdUserDropIn)
		if err != nil {
			return nil, err
		}
		r.Host = append(r.Host, f)
	}
	r.RuntimeClass = RuntimeClass(p, RuntimeClassOptions{TEELabels: opt.TEELabels, Suffix: opt.Paths.Suffix, Custom: opt.Paths.Custom})
	return r, nil
}

// header is the comment that opens every rendered file: who wrote it,
// and which values came from the node rather than from the platform.
func header(p platform.Platform, what string, facts []Fact) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Written by berth for platform %s: %s.\n", p, what)
	if !strings.HasPrefix(what, "RuntimeClass") {
		b.WriteString("Do not edit: `berth config apply` rewrites it, `berth config remove` removes it.\n")
	}
	if len(facts) == 0 {
		b.WriteString("Values from this node's facts: none; everything comes from the platform.\n")
		return b.String()
	}
	b.WriteString("Values from this node's facts (everything else comes from the platform):\n")
	for _, f := range facts {
		fmt.Fprintf(&b, "  - %s (%s)\n", f.What, f.Source)
	}
	return b.String()
}

// podAnnotations are passed through to Kata: its io.katacontainers.*
// annotations select per-pod hypervisor settings the config allows.
var podAnnotations = []string{"io.katacontainers.*"}

// containerdHandler writes the handler tables for a config version.
func containerdHandler(d *doc, p platform.Platform, version int, ps Paths) {
	plugin := runtimecfg.CRIPlugin(version)
	h := ps.handler(p)
	d.table("plugins", plugin, "containerd", "runtimes", h)
	d.kv("runtime_type", "io.containerd.kata.v2")
	d.kv("runtime_path", ps.Shim(p))
	d.kv("privileged_without_host_devices", true)
	d.kv("pod_annotations", podAnnotations)
	d.kv("snapshotter", ps.handlerSnapshotter(p))
	d.table("plugins", plugin, "containerd", "runtimes", h, "options")
	d.kv("ConfigPath", ps.KataConfig(p))
}

// containerdFiles hooks the handler in as the layout allows.
func containerdFiles(p platform.Platform, t Target, ps Paths) ([]File, error) {
	v := t.ConfigVersion
	if v < 2 || v > runtimecfg.MaxContainerdVersion {
		return nil, fmt.Errorf("%w %d: expected 2 (containerd 1.x), 3 (containerd 2.0-2.2) or 4 (containerd 2.3 and later)", ErrUnknownVersion, v)
	}
	l := t.Layout
	name := ps.handler(p) // one handler per node: its drop-in is named after it
	switch l.DropIn {
	case platform.DropInDirectory:
		return []File{dropInFile(p, t, ps, path.Join(l.DropInDir, "berth-"+name+".toml"))}, nil
	case platform.DropInTemplate:
		tmpl := l.Template
		if v >= 3 && l.TemplateV3 != "" {
			tmpl = l.TemplateV3
		}
		f := blockFile(p, t, ps, tmpl, v, "template")
		f.Purpose = "containerd config template (handler " + name + ")"
		// k3s and RKE2 render the template over their own defaults when
		// it includes the "base" template; microk8s always ships its
		// template, so a missing one is an error there.
		if strings.Contains(t.LayoutName, "microk8s") {
			f.Base = nil
		} else {
			f.Base = []byte("{{ template \"base\" . }}\n")
		}
		return []File{f}, nil
	case platform.DropInImports:
		if v == 2 {
			// containerd 1.x replaces a whole plugin section with the one
			// of an imported file, which would drop the node's own CRI
			// settings: the handler goes into the main config instead.
			// containerd 2.x reading a version 2 main config migrates it,
			// handler included.
			f := blockFile(p, t, ps, l.Config, v, "toml")
			f.Purpose = "containerd main config (handler " + name + ")"
			f.Base = []byte("version = 2\n")
			if !parseDaemon(t.Containerd).replacesBuiltinRuntimes() {
				return []File{f}, nil
			}
			runc := runcFile(p, t, l.Config)
			runc.Base = f.Base
			return []File{runc, f}, nil
		}
		file := path.Join(l.DropInDir, "berth-"+name+".toml")
		if dir, ok := importedDir(l.Config, file, t.Imports); ok {
			file = path.Join(dir, "berth-"+name+".toml")
		}
		t.Facts = append(slices.Clone(t.Facts), Fact{What: "drop-in directory /" + path.Dir(file),
			Source: "loaded through the imports of /" + l.Config})
		drop := dropInFile(p, t, ps, file)
		rel := relImport(l.Config, path.Dir(file))
		// Every platform owns the imports block (shared, kept until the
		// last one is removed); apply skips it when the node's own
		// imports already load the drop-in, and otherwise extends the
		// file's own imports (containerd reads one top-level imports key;
		// a second one makes the file invalid TOML).
		imp := File{Path: l.Config, Kind: Block, BlockID: "imports", Where: ReplaceKey, Format: "toml",
			Content:       []byte("imports = [" + tomlString(rel) + "]\n"),
			Base:          []byte(fmt.Sprintf("version = %d\n", v)),
			SkipIfImports: file, Import: rel, When: UnlessImported,
			Purpose: "containerd main config (imports of " + path.Dir(file) + ")"}
		return []File{drop, imp}, nil
	}
	return nil, fmt.Errorf("layout %q: drop-in mechanism %q not supported", t.LayoutName, l.DropIn)
}

// importedDir finds an existing import that loads file or, failing that,
// an import glob of the form DIR/*.toml whose DIR the drop-in can go to.
// When there is neither, the drop-in goes to the layout's directory and
// apply adds it to the imports.
func importedDir(config, file string, imports []string) (string, bool) {
	for _, imp := range imports {
		p, ok := runtimecfg.FSPath(config, imp)
		if !ok {
			continue
		}
		if m, _ := path.Match(p, file); m {
			return path.Dir(file), true
		}
	}
	for _, imp := range imports {
		p, ok := runtimecfg.FSPath(config, imp)
		if ok && path.Base(p) == "*.toml" && !strings.ContainsAny(path.Dir(p), "*?[") {
			return path.Dir(p), true
		}
	}
	return "", false
}

// relImport is the import glob of dir as written in config: relative to
// the config's directory, which containerd resolves against the file that
// names it, so that the same file works on the host and under a --root.
func relImport(config, dir string) string {
	cdir := path.Dir(config)
	if dir == cdir || !strings.HasPrefix(dir, cdir+"/") {
		return "/" + path.Join(dir, "*.toml")
	}
	return path.Join(strings.TrimPrefix(dir, cdir+"/"), "*.toml")
}

func dropInFile(p platform.Platform, t Target, ps Paths, file string) File {
	var d doc
	d.comment(header(p, "containerd drop-in for handler "+ps.handler(p), t.Facts))
	d.kv("version", t.ConfigVersion)
	containerdHandler(&d, p, t.ConfigVersion, ps)
	return File{Path: file, Kind: Owned, Format: "toml", Content: d.bytes(),
		Purpose: "containerd drop-in (handler " + ps.handler(p) + ")"}
}

func blockFile(p platform.Platform, t Target, ps Paths, file string, v int, format string) File {
	var d doc
	d.comment(header(p, "containerd handler "+ps.handler(p), t.Facts))
	containerdHandler(&d, p, v, ps)
	return File{Path: file, Kind: Block, BlockID: ps.block(p), Where: End, Format: format, Content: d.bytes(), Version: v}
}

// CRIODropInName is the crio.conf.d file of a handler: 50 sorts after the
// distribution's own files and before local overrides (99-*).
func CRIODropInName(handler string) string { return "50-berth-" + handler + ".conf" }

func crioFile(p platform.Platform, t Target, ps Paths) File {
	var d doc
	h := ps.handler(p)
	d.comment(header(p, "CRI-O drop-in for handler "+h, t.Facts))
	d.table("crio", "runtime", "runtimes", h)
	d.kv("runtime_path", ps.Shim(p))
	d.kv("runtime_type", "vm")
	d.kv("runtime_root", "/run/vc")
	d.kv("runtime_config_path", ps.KataConfig(p))
	d.kv("privileged_without_host_devices", true)
	d.kv("allowed_annotations", []string{"io.katacontainers.*", "io.kubernetes.cri-o.Devices"})
	if p.GuestPull() {
		d.kv("runtime_pull_image", true)
	}
	return File{Path: path.Join(t.Layout.DropInDir, CRIODropInName(ps.block(p))), Kind: Owned, Format: "toml",
		Content: d.bytes(), Purpose: "CRI-O drop-in (handler " + h + ")"}
}
