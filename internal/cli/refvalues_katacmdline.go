package cli

import (
	"fmt"
	"io/fs"
	"path"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/refvalues"
	"berth.dev/berth/platform"
)

// kataCmdline is the guest kernel command line the Kata runtime passes to
// p's guests: derived from the Kata configuration berth renders for p, or
// from --kata-config. The second result says where it came from.
func kataCmdline(g *Globals, f *refvaluesFlags, p platform.Platform) (string, string, error) {
	if !p.KataGoQEMU() {
		return "", "", fmt.Errorf("platform %s runs Kata's %s runtime with %s: berth derives the command line of the Go runtime's QEMU guests only; give it with --cmdline", p, p.KataRuntime(), p.Hypervisor())
	}
	name := "berth's " + p.KataConfigFile()
	files := []refvalues.KataConfigFile{{Name: name, Data: configure.KataConfig(p, configure.Paths{Prefix: configure.DefaultPrefix})}}
	if f.kataConfig != "" {
		// The file and its config.d drop-ins, as the runtime reads them.
		var err error
		if files, err = refvalues.ReadKataConfigFiles(refvalues.LocalKataConfigFS{}, f.kataConfig); err != nil {
			return "", "", fmt.Errorf("--kata-config: %w", err)
		}
		name = f.kataConfig
		if len(files) > 1 {
			name += fmt.Sprintf(" with %d drop-ins of its config.d", len(files)-1)
		}
	}
	if f.kataConfig == "" && f.installed {
		// The file berth config wrote for p on the host, with its
		// drop-ins: what the runtime there reads.
		got, where, err := installedKataConfig(g, p)
		if err != nil {
			return "", "", err
		}
		if got != nil {
			files, name = got, where
		} else {
			name += " (berth config has not configured " + p.String() + " on this host)"
		}
	}
	// A confidential guest's command line does not depend on the host
	// (no nr_cpus); KataCmdlineFiles refuses a file without a TEE for that.
	line, err := refvalues.KataCmdlineFiles(files, refvalues.KataHost{})
	if err != nil {
		return "", "", err
	}
	return line, fmt.Sprintf("Kata %s runtime's command line for %s, derived by berth", refvalues.KataVersion, name), nil
}

// useKataCmdline puts the command line the guest really gets into in, for
// --manifest and --installed: --cmdline when given, else Kata's own
// (kataCmdline). A manifest's kernelCmdline that differs is reported and
// not used: a TD or SNP guest Kata booted measured Kata's line.
func useKataCmdline(g *Globals, f *refvaluesFlags, changed func(string) bool, p platform.Platform, in *bootInputs) error {
	if in.cmdline == nil {
		// No direct boot is measured (TDX MRTD only): nothing to derive.
		return nil
	}
	if changed("cmdline") {
		c := f.cmdline
		in.cmdline, in.cmdlineSource = &c, "--cmdline"
		return nil
	}
	line, source, err := kataCmdline(g, f, p)
	if err != nil {
		return err
	}
	if *in.cmdline != line {
		g.log.Warn("the manifest's kernelCmdline is not the command line Kata passes; measuring Kata's", "manifest", *in.cmdline, "kata", line)
	}
	in.cmdline, in.cmdlineSource = &line, source
	return nil
}

// installedKataConfig reads the Kata configuration file berth config
// wrote for p on the host --root names (its state names the file, under
// whatever prefix, directory and suffix it was applied with) and the
// drop-ins beside it; nil when berth has not configured p there. The
// second result names the file and its drop-ins for the output.
func installedKataConfig(g *Globals, p platform.Platform) ([]refvalues.KataConfigFile, string, error) {
	w, err := g.Writable()
	if err != nil {
		return nil, "", err
	}
	st, err := configure.LoadState(w)
	if err != nil {
		return nil, "", err
	}
	for _, ps := range st.Platforms {
		if ps.Platform != p.String() {
			continue
		}
		want := configure.Suffix(ps.Suffix).Of(p.Name()) + ".toml"
		for _, of := range ps.Files {
			if of.Kind != configure.Owned || path.Base(of.Path) != want {
				continue
			}
			files, err := refvalues.ReadKataConfigFiles(rootKataFS{w}, of.Path)
			if err != nil {
				return nil, "", fmt.Errorf("the installed Kata configuration: %w", err)
			}
			name := of.Path + " on the host"
			if len(files) > 1 {
				name += fmt.Sprintf(" with %d drop-ins of its config.d", len(files)-1)
			}
			return files, name, nil
		}
	}
	return nil, "", nil
}

// rootKataFS reads a Kata configuration inside the host root, host paths
// resolved as the host would (chroot semantics).
type rootKataFS struct {
	w interface {
		ReadFileMax(string, int64) ([]byte, error)
		ReadDir(string) ([]fs.DirEntry, error)
		Resolve(string) (string, bool, error)
	}
}

func (r rootKataFS) ReadFileMax(name string, max int64) ([]byte, error) {
	return r.w.ReadFileMax(name, max)
}

func (r rootKataFS) ReadDir(name string) ([]fs.DirEntry, error) {
	rel, exists, err := r.w.Resolve(name)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return r.w.ReadDir(rel)
}
