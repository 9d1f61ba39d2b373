package configure

import (
	"fmt"

	"berth.dev/berth/internal/host/errdefs"
	"berth.dev/berth/platform"
)

// Install is one install of berth on a node, the install target every
// command that installs, configures, verifies or tears down works on: its
// suffix, its prefix and where its Kata configuration goes. NewInstall
// defaults and validates it once for the platforms of a run, the way
// containerd validates its CRI runtime config once at load; every name of
// the install (handlers, RuntimeClasses, the nydus-snapshotter's names,
// the installed labels, the field manager, the Kata configuration files)
// derives from it through Suffix and Paths, here and nowhere else.
type Install struct {
	// Suffix is the side-by-side install (--install-suffix).
	Suffix Suffix
	// Prefix is where Kata's binaries and guest images are, an absolute
	// path on the host: --prefix, else DefaultPrefix suffixed.
	Prefix string
	// KataConfigDir is where the Kata configuration files go, an absolute
	// path on the host, "" for <Prefix>/etc/kata (--kata-config-dir).
	KataConfigDir string
}

// InstallFlags are an install's flags as the user gave them; "" is not
// given.
type InstallFlags struct {
	// Suffix is --install-suffix.
	Suffix string
	// Prefix is --prefix.
	Prefix string
	// KataConfigDir is --kata-config-dir.
	KataConfigDir string
}

// NewInstall defaults and validates the install f names for plats: the
// suffix a DNS label short enough for every name it makes for each of
// plats, the prefix and the Kata configuration directory absolute. Every
// error is a usage error (errdefs.ErrUsage) naming the flag.
func NewInstall(f InstallFlags, plats ...platform.Platform) (Install, error) {
	s, err := ParseSuffix("--install-suffix", f.Suffix)
	if err != nil {
		return Install{}, errdefs.Usage(err)
	}
	in := Install{Suffix: s, Prefix: f.Prefix, KataConfigDir: f.KataConfigDir}
	if err := in.check(plats); err != nil {
		return Install{}, errdefs.Usage(err)
	}
	return in.defaulted(), nil
}

// defaulted fills in the prefix: the one place its default is decided.
func (in Install) defaulted() Install {
	if in.Prefix == "" {
		in.Prefix = in.Suffix.Prefix()
	}
	return in
}

// check validates in for plats, its prefix not yet defaulted.
func (in Install) check(plats []platform.Platform) error {
	for _, p := range plats {
		if err := in.Suffix.Check(p); err != nil {
			return fmt.Errorf("--install-suffix: %w", err)
		}
	}
	return Paths{Prefix: in.Prefix, KataConfigDir: in.KataConfigDir}.Check()
}

// Paths are the host paths of the install, for rendering; hypervisor is
// --hypervisor-path ("" for the prefix's own).
func (in Install) Paths(hypervisor string) Paths {
	return Paths{Prefix: in.Prefix, Hypervisor: hypervisor, KataConfigDir: in.KataConfigDir, Suffix: in.Suffix, checked: true}
}

// install is the install ps belong to, defaulted and validated for p
// unless NewInstall did that already (Paths from Install.Paths): Render
// takes Paths from callers that never went through NewInstall too.
func (ps Paths) install(p platform.Platform) (Install, error) {
	in := Install{Suffix: ps.Suffix, Prefix: ps.Prefix, KataConfigDir: ps.KataConfigDir}
	if ps.checked {
		return in, nil
	}
	if _, err := ParseSuffix("install suffix", string(ps.Suffix)); err != nil {
		return Install{}, err
	}
	if err := in.check([]platform.Platform{p}); err != nil {
		return Install{}, err
	}
	return in.defaulted(), nil
}

// DefaultedPrefix is ps's prefix, or the default for ps's suffix when ps
// name none (Paths built without NewInstall), as NewInstall defaults it.
func (ps Paths) DefaultedPrefix() string {
	return Install{Suffix: ps.Suffix, Prefix: ps.Prefix}.defaulted().Prefix
}
