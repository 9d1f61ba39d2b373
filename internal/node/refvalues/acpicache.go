package refvalues

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"berth.dev/berth/internal/host/hostfs"
)

// cachedBlobs is the on-disk form of a cache entry.
type cachedBlobs struct {
	QEMU   string      `json:"qemu"`
	Args   []string    `json:"args"`
	Loader []byte      `json:"loader"`
	Files  []FwCfgFile `json:"files"`
	// Platform is what edk2 2025.05+ measures besides the ACPI tables.
	Platform *PlatformBlobs `json:"platform"`
}

// CachedACPIBlobs returns QEMU's ACPI blobs for m and QEMU's version,
// dumping them once per QEMU build and argument list: the entry under
// dir/acpi/ is keyed by SHA-256 of `qemu --version` and the arguments, so a
// QEMU upgrade or another machine shape dumps afresh. dir "" disables the
// cache. A cache that cannot be written is logged by the caller, not fatal.
func CachedACPIBlobs(ctx context.Context, dir string, m QEMUMachine) (*ACPIBlobs, [3]int, error) {
	ver, verLine, err := qemuIdentity(ctx, m.Binary)
	if err != nil {
		return nil, ver, err
	}
	args := m.Args()
	// acpiDumpVersion names how the blobs are read: entries written by a
	// berth that read them from another chipset state are not reused.
	path := cachePath(dir, "acpi", acpiDumpVersion, string(verLine), strings.Join(args, "\x00"), fmt.Sprintf("pciexbar=%#x", m.pciExBar()))
	var c cachedBlobs
	if ok, err := readCache(path, &c); err != nil {
		return nil, ver, fmt.Errorf("ACPI blob cache: %w", err)
	} else if ok {
		blobs := &ACPIBlobs{Loader: c.Loader, Files: c.Files, Platform: c.Platform}
		if _, err := loaderAllocations(blobs.Loader); err == nil && c.Platform != nil {
			return blobs, ver, nil
		}
	}
	blobs, err := DumpACPIBlobs(ctx, m)
	if err != nil {
		return nil, ver, err
	}
	if path != "" {
		if err := writeCache(path, cachedBlobs{QEMU: strings.TrimSpace(string(verLine)), Args: args, Loader: blobs.Loader, Files: blobs.Files, Platform: blobs.Platform}); err != nil {
			return blobs, ver, fmt.Errorf("%w: %w", ErrCacheWrite, err)
		}
	}
	return blobs, ver, nil
}

// cachePath is the cache entry dir/sub/<SHA-256 of the key parts>.json;
// "" when dir is "" (no cache). The parts are strings so that no part of
// a key can be left out unnoticed (a list joins with NULs first).
func cachePath(dir, sub string, parts ...string) string {
	if dir == "" {
		return ""
	}
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return filepath.Join(dir, sub, hex.EncodeToString(h.Sum(nil))+".json")
}

// readCache decodes the entry at path into v. It reports false for no
// cache, no entry and a damaged entry (which the caller makes afresh and
// replaces), and an error only when the entry cannot be read.
func readCache(path string, v any) (bool, error) {
	if path == "" {
		return false, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return json.Unmarshal(b, v) == nil, nil
}

// qemuIdentity returns QEMU's version and its whole `--version` output,
// which names the distribution build too and so keys the caches.
func qemuIdentity(ctx context.Context, qemu string) ([3]int, []byte, error) {
	ver, err := QEMUVersion(ctx, qemu)
	if err != nil {
		return ver, nil, err
	}
	verLine, err := exec.CommandContext(ctx, qemu, "--version").Output()
	if err != nil {
		return ver, nil, fmt.Errorf("%s --version: %w", qemu, err)
	}
	return ver, verLine, nil
}

// acpiDumpVersion is part of every ACPI cache key: "chipset-v2" is the
// dump after programChipset (the first, unnamed, read the reset state);
// "chipset-v3" also holds the fw_cfg items and SMBIOS tables edk2
// 2025.05+ measures (PlatformBlobs).
const acpiDumpVersion = "chipset-v3"

// ErrCacheWrite marks a result that is valid but could not be cached.
var ErrCacheWrite = errors.New("ACPI blob cache not written")

// writeCache writes the entry atomically (hostfs.WriteAtomic), so a
// reader never sees half an entry.
func writeCache(path string, c any) error {
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	dir, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return hostfs.WriteAtomic(hostfs.RootFS(dir), filepath.Base(path), b, 0o644)
}
