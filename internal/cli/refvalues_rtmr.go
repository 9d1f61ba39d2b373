package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"berth.dev/berth/internal/node/refvalues"
)

// rtmrFlags are the TDX direct-boot options of berth refvalues.
type rtmrFlags struct {
	memory uint64
	qemu   string
	edk2   string
}

// kataQEMU is where kata-deploy installs Kata's QEMU; berth prefers it to a
// distribution QEMU because it is the one that builds the guest's tables.
const kataQEMU = "/opt/kata/bin/qemu-system-x86_64"

func addRTMRFlags(fl *pflag.FlagSet, f *rtmrFlags) {
	fl.Uint64Var(&f.memory, "memory", 2048, "TDX guest memory in MiB (Kata's default_memory), for the TD HOB and ACPI tables in RTMR0")
	fl.StringVar(&f.qemu, "qemu", "", "QEMU binary whose ACPI tables (RTMR0) and fw_cfg kernel, initrd and command line (RTMR1, RTMR2) are measured (default "+kataQEMU+", else qemu-system-x86_64 in PATH)")
	fl.StringVar(&f.edk2, "edk2", "auto", "TDVF event-log profile: auto (from the version the firmware carries), default (edk2 2022.11-2025.02), 202408, 202505 or 202508 (and later)")
}

// tdxRTMRRequest builds the RTMR0-2 request when a kernel is given: it
// asks QEMU (stopped, through qtest, no TDX needed) for the guest's ACPI blobs,
// cached under the berth cache by QEMU build and arguments.
func tdxRTMRRequest(cmd *cobra.Command, g *Globals, f *refvaluesFlags, in bootInputs) (*refvalues.TDXRTMRRequest, error) {
	changed := cmd.Flags().Changed
	if !in.kernel.Given() {
		for _, name := range []string{"initrd", "cmdline", "memory", "qemu", "edk2"} {
			if changed(name) {
				return nil, fmt.Errorf("--%s needs --kernel: RTMR0-2 are computed for a direct boot only", name)
			}
		}
		return nil, nil
	}
	profile, err := refvalues.ParseEDK2Profile(f.rtmr.edk2)
	if err != nil {
		return nil, fmt.Errorf("--edk2: %w", err)
	}
	qemu := f.rtmr.qemu
	if qemu == "" {
		if _, err := os.Stat(kataQEMU); err == nil {
			qemu = kataQEMU
		} else if qemu, err = exec.LookPath("qemu-system-x86_64"); err != nil {
			return nil, fmt.Errorf("no QEMU found (%s or qemu-system-x86_64 in PATH): RTMR0 measures QEMU's ACPI tables; give --qemu", kataQEMU)
		}
	}
	m := refvalues.KataTDXMachine(qemu, f.rtmr.memory, 1, 1)
	// QEMU describes the PCIe MMCONFIG window where the firmware puts
	// it, which moved in edk2 2023.05.
	if in.firmware.Given() {
		if m.PCIExBar, err = refvalues.FirmwarePCIExBar(in.firmware, profile); err != nil {
			return nil, err
		}
	}
	blobs, ver, err := refvalues.CachedACPIBlobs(cmd.Context(), acpiCacheDir(g, f.cache, changed("cache")), m)
	if errors.Is(err, refvalues.ErrCacheWrite) {
		g.log.Warn("ACPI blobs not cached", "err", err)
	} else if err != nil {
		return nil, err
	}
	g.log.Info("ACPI tables", "qemu", qemu, "version", fmt.Sprintf("%d.%d.%d", ver[0], ver[1], ver[2]), "memoryMiB", f.rtmr.memory)
	cacheDir := acpiCacheDir(g, f.cache, changed("cache"))
	// The same QEMU, with the same machine, is asked what it hands the
	// firmware for this kernel, initrd and command line: RTMR1 and RTMR2
	// measure that rather than a model of QEMU's loader.
	ask := func(kernel, initrd []byte, cmdline string) (*refvalues.FwCfgBoot, error) {
		boot, _, err := refvalues.CachedBootBlobs(cmd.Context(), cacheDir, m, kernel, initrd, cmdline)
		if errors.Is(err, refvalues.ErrCacheWrite) {
			g.log.Warn("fw_cfg boot items not cached", "err", err)
			err = nil
		}
		return boot, err
	}
	return &refvalues.TDXRTMRRequest{
		Kernel: in.kernel, Initrd: in.initrd, Cmdline: in.cmdline,
		MemoryMiB: f.rtmr.memory, ACPI: blobs, QEMU: ver, Profile: profile, FwCfg: ask,
	}, nil
}

// acpiCacheDir is where the ACPI blobs are cached: --cache when given
// ("" for none); without it, berth's cache on this machine
// (/var/cache/berth) when --root is this machine's / and berth runs as
// root, and the user's cache directory ($XDG_CACHE_HOME/berth, else
// ~/.cache/berth; none when it is unknown) otherwise: measuring another
// host's boot components never writes this machine's /var/cache, and a
// user who is not root gets a cache of their own instead of a refusal.
func acpiCacheDir(g *Globals, cache string, given bool) string {
	if given || (filepath.Clean(g.root) == "/" && os.Geteuid() == 0) {
		return cache
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "berth")
}
