package configure

import (
	"fmt"
	"strconv"
	"strings"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/platform"
)

// This file models what containerd does with the file berth writes, per
// containerd version, from containerd's own config loading code:
//
//   - containerd 1.6.20 and 1.7.35, services/server/config/config.go:
//     LoadConfig reads the main file, then each import; mergeConfig replaces
//     a whole plugin section with the one of a later file ("Replace entire
//     sections instead of merging map's values"). Config.Decode hands a
//     plugin's section to go-toml v1 (tree.Unmarshal) over the plugin's
//     default config, and go-toml v1 builds a new map for a map field: once
//     the file names any table under containerd.runtimes, the built-in
//     "runc" runtime (pkg/cri/config/config_unix.go DefaultConfig) is gone,
//     and ValidatePluginConfig refuses to load the CRI plugin with "no
//     corresponding runtime configured in `containerd.runtimes` for
//     `containerd` `default_runtime_name = "runc"`" while
//     default_runtime_name still names it. 1.7 refuses a file whose version
//     is above 2; 1.6 ignores such a file's plugin sections.
//   - containerd 2.x, cmd/containerd/server/config/config.go: every loaded
//     file whose version is below the daemon's own (3 for 2.0-2.2, 4 from
//     2.3) is migrated in memory (MigrateConfigTo, logging "Configuration
//     migrated from version N"), then merged with mergo key by key; a
//     version above the daemon's is refused by ValidateVersion. Decode
//     re-encodes the plugin section and decodes it with go-toml v2 over the
//     default config, which adds to the default runtimes map instead of
//     replacing it, so runc stays. resolveImports joins a relative import
//     with the directory of the file that names it, then globs it.
//
// kata-containers/kata-containers#3229 is the same 1.x failure met by
// kata-deploy when /etc/containerd/config.toml did not exist.

// daemon is one containerd version as far as its config loading differs.
type daemon struct {
	major, minor int
	known        bool
}

// parseDaemon reads "1.6.20~ds1", "v2.1.9" or "2.4.2"; an empty or
// unreadable version is unknown.
func parseDaemon(v string) daemon {
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(v), "v"), ".", 3)
	if len(parts) < 2 {
		return daemon{}
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.TrimLeftFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil || major < 1 || major > 2 {
		return daemon{}
	}
	return daemon{major: major, minor: minor, known: true}
}

// maxConfigVersion is the newest config version the daemon reads (and the
// one `containerd config default` prints).
func (d daemon) maxConfigVersion() int {
	switch {
	case d.major == 1:
		return 2
	case d.minor < 3:
		return 3
	default:
		return 4
	}
}

// reads reports whether the daemon loads a file of config version v as
// that version (rather than refusing it or, 1.6, ignoring it).
func (d daemon) reads(v int) bool {
	if d.major == 1 {
		return v == 2
	}
	return v >= 2 && v <= d.maxConfigVersion()
}

// replacesBuiltinRuntimes reports whether naming any runtime in the file
// drops the daemon's built-in runc (containerd 1.x, see above). An unknown
// daemon is assumed to, since restating runc costs nothing where it is kept.
func (d daemon) replacesBuiltinRuntimes() bool { return !d.known || d.major == 1 }

// ErrRefused marks a change berth will not make because the node's files or
// runtime would not survive it (a config that does not parse, a version
// the runtime does not read, a restart that broke the runtime). It is
// errdefs.ErrRefused, the one refusal class: the CLI exits 1 for it, as the
// node, not the command line, is what needs fixing.
var ErrRefused = errdefs.ErrRefused

// refused wraps err as ErrRefused.
func refused(format string, a ...any) error {
	return fmt.Errorf("%w: %w", ErrRefused, fmt.Errorf(format, a...))
}

// TargetFor takes from a node's facts what p's files depend on: the
// runtime layout, the containerd version, the config version to write and
// the imports already in place. flagVersion (--containerd-config-version,
// 0 when not given) stands in for an unknown containerd version.
//
// The config version is the main config's own when the daemon reads it
// (containerd 2.x migrates a version 2 file in memory, so a handler written
// in version 2 keys is what it expects there), else the daemon's newest.
func TargetFor(f *facts.Facts, p platform.Platform, flagVersion int) (Target, error) {
	l, ok := p.Distribution().Layout()
	if !ok {
		return Target{}, fmt.Errorf("distribution %s has no known runtime layout: give the runtime's config file and unit (--containerd-config or --crio-config, --runtime-unit)", p.Distribution())
	}
	return TargetForLayout(f, p, l, flagVersion)
}

// TargetForLayout is TargetFor with the runtime layout given: a custom
// distribution's, from the paths the user named (platform.CustomLayout).
// The facts must have been discovered with the same layout.
func TargetForLayout(f *facts.Facts, p platform.Platform, l platform.Layout, flagVersion int) (Target, error) {
	t := Target{LayoutName: p.Distribution().String(), Layout: l}
	if l.Runtime != platform.Containerd {
		return t, nil
	}
	var ctr facts.ContainerRuntime
	if f != nil && f.Runtimes.Containerd != nil {
		ctr = *f.Runtimes.Containerd
	}
	own := ctr.Layout == t.LayoutName
	fileVersion := 0
	if own && ctr.ConfigExists && ctr.ConfigError == "" {
		fileVersion = ctr.ConfigVersion
	}
	d := parseDaemon(ctr.Version)
	switch {
	case flagVersion != 0:
		if flagVersion < 2 || flagVersion > runtimecfg.MaxContainerdVersion {
			return t, fmt.Errorf("--containerd-config-version %d: expected 2 (containerd 1.x), 3 (containerd 2.0-2.2) or 4 (containerd 2.3 and later)", flagVersion)
		}
		if d.known && !d.reads(flagVersion) {
			return t, fmt.Errorf("--containerd-config-version %d: containerd %s on this node does not read it (it reads up to version %d)", flagVersion, ctr.Version, d.maxConfigVersion())
		}
		t.ConfigVersion = flagVersion
		t.Facts = append(t.Facts, Fact{What: fmt.Sprintf("containerd config version %d", flagVersion), Source: "--containerd-config-version"})
	case !d.known && fileVersion >= 2:
		t.ConfigVersion = fileVersion
		t.Facts = append(t.Facts, Fact{What: fmt.Sprintf("containerd config version %d", fileVersion),
			Source: fmt.Sprintf("%s: version = %d (the containerd version is unknown)", ctr.ConfigPath, fileVersion)})
	case !d.known:
		return t, fmt.Errorf("%w: containerd version on this node is %q (runtimes.containerd.version) and %s sets no version: pass --containerd-config-version 2 (containerd 1.x), 3 (2.0-2.2) or 4 (2.3 and later)",
			ErrUnknownVersion, ctr.Version, l.Config)
	case fileVersion >= 2 && fileVersion != d.maxConfigVersion() && d.reads(fileVersion):
		t.ConfigVersion = fileVersion
		t.Facts = append(t.Facts, Fact{What: fmt.Sprintf("containerd config version %d", fileVersion),
			Source: fmt.Sprintf("%s: version = %d, read by containerd %s", ctr.ConfigPath, fileVersion, ctr.Version)})
	case fileVersion != 0 && !d.reads(fileVersion):
		return t, refused("%s is a version %d config, which containerd %s does not read (it reads up to version %d): fix the file first (containerd config migrate, or containerd config default for this version)",
			ctr.ConfigPath, fileVersion, ctr.Version, d.maxConfigVersion())
	default:
		// No file, or one of the daemon's own version (which may be the
		// one berth created): the same fact either way, so that a second
		// run renders the same files.
		t.ConfigVersion = d.maxConfigVersion()
		t.Facts = append(t.Facts, Fact{What: fmt.Sprintf("containerd config version %d", t.ConfigVersion),
			Source: "runtimes.containerd.version = " + ctr.Version})
	}
	t.Containerd = ctr.Version
	if own && len(ctr.Imports) > 0 {
		// Not a header fact: after the first apply they include berth's
		// own entry. The drop-in's header names its directory instead.
		t.Imports = ctr.Imports
	}
	return t, nil
}

// runcTable is containerd 1.x's built-in runc runtime as its DefaultConfig
// has it (type io.containerd.runc.v2; every option at its zero value, which
// is what no options means to the runc shim; 1.7's sandbox_mode defaults
// to podsandbox in ValidatePluginConfig when unset).
func runcTable(d *doc, version int) {
	d.table("plugins", runtimecfg.CRIPlugin(version), "containerd", "runtimes", "runc")
	d.kv("runtime_type", "io.containerd.runc.v2")
}

// runcFile restates the built-in runc handler in the main config of a
// daemon that would drop it (see the top of this file). Apply adds it only
// when the file does not define its default runtime itself.
func runcFile(p platform.Platform, t Target, file string) File {
	var d doc
	d.comment("Written by berth: containerd " + orUnknown(t.Containerd) + " drops its built-in runc runtime once this file\n" +
		"names any runtime, and then refuses to load CRI while default_runtime_name is runc.\n" +
		"This restates the built-in one; `berth config remove` takes it out with the last handler.")
	runcTable(&d, t.ConfigVersion)
	return File{Path: file, Kind: Block, BlockID: "runc", Where: End, Format: "toml", Content: d.bytes(),
		When: UnlessDefaultRuntimeDefined, Purpose: "containerd main config (built-in runc restated for handler " + p.Handler() + ")"}
}

func orUnknown(s string) string {
	if s == "" {
		return "(version unknown)"
	}
	return s
}

// defaultRuntimeDefined reports whether a containerd config names the
// runtime its CRI plugin uses by default (runc when it sets none) among its
// own runtime tables, or names another default berth must not touch.
func defaultRuntimeDefined(name string, data []byte) (bool, error) {
	c, err := runtimecfg.ParseContainerd(name, data)
	if err != nil {
		return false, err
	}
	def := c.DefaultRuntime
	if def == "" {
		def = "runc"
	}
	if def != "runc" {
		// Only the built-in runc can be restated; another missing default
		// was broken before berth came.
		return true, nil
	}
	for _, h := range c.Handlers {
		if h.Name == def {
			return true, nil
		}
	}
	return false, nil
}
