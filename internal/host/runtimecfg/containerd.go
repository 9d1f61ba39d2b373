package runtimecfg

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/lazyre"
)

// The CRI plugin keys of each containerd config version. Version 1 used
// short plugin names; version 2 (containerd 1.x) the grpc plugin; versions
// 3 and 4 (containerd 2.x) split the CRI plugin into runtime and images.
const (
	PluginCRIv1      = "cri"
	PluginCRIv2      = "io.containerd.grpc.v1.cri"
	PluginCRIRuntime = "io.containerd.cri.v1.runtime"
	PluginCRIImages  = "io.containerd.cri.v1.images"
)

// MaxContainerdVersion is the newest config version berth understands
// (containerd 2.4 prints version = 4).
const MaxContainerdVersion = 4

// Containerd is what berth reads from one containerd config file.
type Containerd struct {
	// File names the file in errors and in Handler.Source.
	File string `json:"file"`
	// Version is the top-level `version`; 1 when the file does not set it,
	// as containerd assumes.
	Version    int  `json:"version"`
	VersionSet bool `json:"versionSet"`
	// Imports are the `imports` entries as written (globs, absolute or
	// relative to the file's directory).
	Imports []string `json:"imports,omitempty"`
	// DefaultRuntime is the CRI default_runtime_name.
	DefaultRuntime string `json:"defaultRuntime,omitempty"`
	// Snapshotter is the CRI default snapshotter (overlayfs when unset).
	Snapshotter string `json:"snapshotter,omitempty"`
	// Handlers are the runtime handlers under the CRI plugin key that this
	// config version reads, sorted by name.
	Handlers []Handler `json:"handlers,omitempty"`
	// ProxyPlugins are the external plugins (nydus, devmapper proxies ...),
	// sorted by name.
	ProxyPlugins []ProxyPlugin `json:"proxyPlugins,omitempty"`
	// BuiltinSnapshotters are the built-in block snapshotters this file
	// configures well enough to load: devmapper needs a pool_name and
	// blockfile a scratch_file, otherwise containerd skips the plugin.
	BuiltinSnapshotters []string `json:"builtinSnapshotters,omitempty"`
	// DevmapperPool is the devmapper snapshotter's pool_name.
	DevmapperPool string `json:"devmapperPool,omitempty"`
	// EnableCDI is the CRI plugin's enable_cdi under the key this config
	// version reads, nil when the file does not set it (containerd 1.7
	// then leaves CDI off, 2.x turns it on).
	EnableCDI *bool `json:"enableCdi,omitempty"`
	// Misplaced are handlers written under a CRI plugin key that this config
	// version does not read: containerd ignores them, the classic cause of
	// `no runtime for "kata" is configured`.
	Misplaced []Misplaced `json:"misplaced,omitempty"`
}

// ProxyPlugin is one [proxy_plugins.<name>] entry.
type ProxyPlugin struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Address string `json:"address,omitempty"`
}

// Misplaced is a handler under the wrong CRI plugin key for the version.
type Misplaced struct {
	Handler string `json:"handler"`
	Plugin  string `json:"plugin"`
	Version int    `json:"version"`
	Source  string `json:"source,omitempty"`
}

// String says what is wrong, for reports.
func (m Misplaced) String() string {
	return fmt.Sprintf("%s: handler %q under plugins.%q is ignored by a version %d config (expected plugins.%q)",
		m.Source, m.Handler, m.Plugin, m.Version, CRIPlugin(m.Version))
}

// Snapshotters returns the names of the proxy plugins of type snapshot,
// then the configured built-in block snapshotters.
func (c *Containerd) Snapshotters() []string {
	var out []string
	for _, p := range c.ProxyPlugins {
		if p.Type == "snapshot" {
			out = append(out, p.Name)
		}
	}
	return append(out, c.BuiltinSnapshotters...)
}

// CRIPlugin returns the plugin key that holds runtime handlers in a config
// of the given version.
func CRIPlugin(version int) string {
	switch {
	case version <= 1:
		return PluginCRIv1
	case version == 2:
		return PluginCRIv2
	default:
		return PluginCRIRuntime
	}
}

type containerdRuntimeTOML struct {
	RuntimeType                  *string        `toml:"runtime_type"`
	RuntimePath                  *string        `toml:"runtime_path"`
	RuntimeRoot                  *string        `toml:"runtime_root"`
	Snapshotter                  *string        `toml:"snapshotter"`
	PodAnnotations               *[]string      `toml:"pod_annotations"`
	PrivilegedWithoutHostDevices *bool          `toml:"privileged_without_host_devices"`
	Options                      map[string]any `toml:"options"`
}

type criContainerdTOML struct {
	Snapshotter        *string                          `toml:"snapshotter"`
	DefaultRuntimeName *string                          `toml:"default_runtime_name"`
	Runtimes           map[string]containerdRuntimeTOML `toml:"runtimes"`
}

type criTOML struct {
	Containerd criContainerdTOML `toml:"containerd"`
	EnableCDI  *bool             `toml:"enable_cdi"`
}

type containerdTOML struct {
	Version *int64   `toml:"version"`
	Imports []string `toml:"imports"`
	Plugins struct {
		CRIv1   criTOML `toml:"cri"`
		CRIv2   criTOML `toml:"io.containerd.grpc.v1.cri"`
		Runtime criTOML `toml:"io.containerd.cri.v1.runtime"`
		Images  struct {
			Snapshotter *string `toml:"snapshotter"`
		} `toml:"io.containerd.cri.v1.images"`
		Devmapper struct {
			PoolName string `toml:"pool_name"`
		} `toml:"io.containerd.snapshotter.v1.devmapper"`
		Blockfile struct {
			ScratchFile string `toml:"scratch_file"`
		} `toml:"io.containerd.snapshotter.v1.blockfile"`
	} `toml:"plugins"`
	ProxyPlugins map[string]struct {
		Type    string `toml:"type"`
		Address string `toml:"address"`
	} `toml:"proxy_plugins"`
}

// versionLine finds the line and column of the top-level version key, to
// point a version error at it.
var versionLine = lazyre.New(`(?m)^[ \t]*version[ \t]*=`)

// ParseContainerd reads one containerd config file. file only names the
// file in errors and in each handler's Source. Errors are *ParseError.
func ParseContainerd(file string, data []byte) (*Containerd, error) {
	var doc containerdTOML
	if err := decode(file, data, &doc); err != nil {
		return nil, err
	}
	c := &Containerd{File: file, Version: 1, Imports: doc.Imports}
	if doc.Version != nil {
		v := *doc.Version
		if v < 1 || v > MaxContainerdVersion {
			pe := &ParseError{File: file, Key: "version",
				Msg: fmt.Sprintf("unsupported config version %d, expected 1 to %d", v, MaxContainerdVersion)}
			if loc := versionLine.FindIndex(data); loc != nil {
				pe.Line = strings.Count(string(data[:loc[0]]), "\n") + 1
				pe.Column = loc[1] - loc[0] - len(strings.TrimLeft(string(data[loc[0]:loc[1]]), " \t")) + 1
			}
			return nil, pe
		}
		c.Version, c.VersionSet = int(v), true
	}

	cris := map[string]criTOML{
		PluginCRIv1:      doc.Plugins.CRIv1,
		PluginCRIv2:      doc.Plugins.CRIv2,
		PluginCRIRuntime: doc.Plugins.Runtime,
	}
	own := CRIPlugin(c.Version)
	cri := cris[own]
	c.Handlers = containerdHandlers(file, cri.Containerd.Runtimes)
	if p := cri.Containerd.DefaultRuntimeName; p != nil {
		c.DefaultRuntime = *p
	}
	c.EnableCDI = cri.EnableCDI
	if c.Version >= 3 {
		if p := doc.Plugins.Images.Snapshotter; p != nil {
			c.Snapshotter = *p
		}
	} else if p := cri.Containerd.Snapshotter; p != nil {
		c.Snapshotter = *p
	}
	for _, key := range slices.Sorted(maps.Keys(cris)) {
		if key == own {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(cris[key].Containerd.Runtimes)) {
			c.Misplaced = append(c.Misplaced, Misplaced{Handler: name, Plugin: key, Version: c.Version, Source: file})
		}
	}
	if doc.Plugins.Devmapper.PoolName != "" {
		c.DevmapperPool = doc.Plugins.Devmapper.PoolName
		c.BuiltinSnapshotters = append(c.BuiltinSnapshotters, "devmapper")
	}
	if doc.Plugins.Blockfile.ScratchFile != "" {
		c.BuiltinSnapshotters = append(c.BuiltinSnapshotters, "blockfile")
	}
	for _, name := range slices.Sorted(maps.Keys(doc.ProxyPlugins)) {
		p := doc.ProxyPlugins[name]
		c.ProxyPlugins = append(c.ProxyPlugins, ProxyPlugin{Name: name, Type: p.Type, Address: p.Address})
	}
	return c, nil
}

func containerdHandlers(file string, runtimes map[string]containerdRuntimeTOML) []Handler {
	out := make([]Handler, 0, len(runtimes))
	for _, name := range slices.Sorted(maps.Keys(runtimes)) {
		r := runtimes[name]
		h := Handler{Handler: facts.Handler{Name: name, Source: file}}
		setKey(&h, "runtime_type", r.RuntimeType, &h.RuntimeType)
		setKey(&h, "runtime_path", r.RuntimePath, &h.RuntimePath)
		setKey(&h, "runtime_root", r.RuntimeRoot, &h.RuntimeRoot)
		setKey(&h, "snapshotter", r.Snapshotter, &h.Snapshotter)
		setKey(&h, "pod_annotations", r.PodAnnotations, &h.PodAnnotations)
		setKey(&h, "privileged_without_host_devices", r.PrivilegedWithoutHostDevices, &h.PrivilegedWithoutHostDevices)
		if r.Options != nil {
			h.Options = r.Options
			h.Keys = append(h.Keys, "options")
			// Kata's shim reads ConfigPath; other shims may not have one.
			if s, ok := r.Options["ConfigPath"].(string); ok {
				h.ConfigPath = s
			}
		}
		slices.Sort(h.Keys)
		out = append(out, h)
	}
	return out
}

// Merge applies over (an imported file) to c with containerd's import
// semantics: later files override earlier ones key by key, handlers merge
// by name, proxy plugins by name. The version stays c's: containerd
// migrates every imported file to the running version before merging.
func (c *Containerd) Merge(over *Containerd) *Containerd {
	out := *c
	out.Handlers = mergeHandlers(c.Handlers, over.Handlers)
	if over.DefaultRuntime != "" {
		out.DefaultRuntime = over.DefaultRuntime
	}
	if over.Snapshotter != "" {
		out.Snapshotter = over.Snapshotter
	}
	if over.DevmapperPool != "" {
		out.DevmapperPool = over.DevmapperPool
	}
	if over.EnableCDI != nil {
		out.EnableCDI = over.EnableCDI
	}
	plugins := make(map[string]ProxyPlugin)
	for _, p := range c.ProxyPlugins {
		plugins[p.Name] = p
	}
	for _, p := range over.ProxyPlugins {
		plugins[p.Name] = p
	}
	out.ProxyPlugins = nil
	for _, name := range slices.Sorted(maps.Keys(plugins)) {
		out.ProxyPlugins = append(out.ProxyPlugins, plugins[name])
	}
	builtin := append(slices.Clone(c.BuiltinSnapshotters), over.BuiltinSnapshotters...)
	slices.Sort(builtin)
	out.BuiltinSnapshotters = slices.Compact(builtin)
	out.Misplaced = append(slices.Clone(c.Misplaced), over.Misplaced...)
	return &out
}
