package cli

import (
	"fmt"

	"berth.dev/berth/internal/node/configure"
	"berth.dev/berth/internal/node/refvalues"
	"berth.dev/berth/platform"
)

// kataCmdline is the guest kernel command line the Kata runtime passes to
// p's guests: derived from the Kata configuration berth renders for p, or
// from --kata-config. The second result says where it came from.
func kataCmdline(f *refvaluesFlags, p platform.Platform) (string, string, error) {
	if p.KataRuntime() != platform.GoRuntime || p.Hypervisor() != platform.QEMU {
		return "", "", fmt.Errorf("platform %s runs Kata's %s runtime with %s: berth derives the command line of the Go runtime's QEMU guests only; give it with --cmdline", p, p.KataRuntime(), p.Hypervisor())
	}
	name := "berth's " + p.KataConfigFile()
	files := []refvalues.KataConfigFile{{Name: name, Data: configure.KataConfig(p, configure.Paths{Prefix: configure.DefaultPrefix})}}
	if f.kataConfig != "" {
		// The file and its config.d drop-ins, as the runtime reads them.
		var err error
		if files, err = refvalues.ReadKataConfigFiles(f.kataConfig); err != nil {
			return "", "", fmt.Errorf("--kata-config: %w", err)
		}
		name = f.kataConfig
		if len(files) > 1 {
			name += fmt.Sprintf(" with %d drop-ins of its config.d", len(files)-1)
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
	line, source, err := kataCmdline(f, p)
	if err != nil {
		return err
	}
	if *in.cmdline != line {
		g.log.Warn("the manifest's kernelCmdline is not the command line Kata passes; measuring Kata's", "manifest", *in.cmdline, "kata", line)
	}
	in.cmdline, in.cmdlineSource = &line, source
	return nil
}
