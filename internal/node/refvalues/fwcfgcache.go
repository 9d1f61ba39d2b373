package refvalues

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// cachedBoot is the on-disk form of a boot-items cache entry. It keeps
// what QEMU changed (the setup sectors, the initrd address) whole and the
// rest as digests of the bytes QEMU passed on unchanged: an entry is a
// few KiB, not a copy of the kernel and initrd, and is rebuilt from the
// inputs, which the key already pins.
type cachedBoot struct {
	QEMU       string   `json:"qemu"`
	Args       []string `json:"args"`
	Setup      []byte   `json:"setup"`
	KernelData string   `json:"kernelDataSHA256"`
	// BootKernel is the SHA-256 of etc/boot/kernel, "" when QEMU
	// offered no such file.
	BootKernel string `json:"bootKernelSHA256,omitempty"`
	Initrd     string `json:"initrdSHA256,omitempty"`
	InitrdAddr uint32 `json:"initrdAddr"`
	Cmdline    string `json:"cmdline"`
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// CachedBootBlobs returns what QEMU hands the firmware for machine m
// booting kernel, initrd (nil for none) and cmdline, with QEMU's version,
// asking QEMU (DumpBootBlobs) once per QEMU build, argument list and
// inputs: the entry under dir/fwcfg/ is keyed by SHA-256 of `qemu
// --version`, the arguments and the inputs' SHA-256, as the ACPI blobs
// are (CachedACPIBlobs). dir "" disables the cache. An entry that does
// not rebuild to the inputs is dumped again and replaced; one that cannot
// be written returns the blobs with an error wrapping ErrCacheWrite.
func CachedBootBlobs(ctx context.Context, dir string, m QEMUMachine, kernel, initrd []byte, cmdline string) (*FwCfgBoot, [3]int, error) {
	ver, verLine, err := qemuIdentity(ctx, m.Binary)
	if err != nil {
		return nil, ver, err
	}
	args := append(m.Args(), "-kernel", "sha256:"+sha256Hex(kernel))
	if initrd != nil {
		args = append(args, "-initrd", "sha256:"+sha256Hex(initrd))
	}
	args = append(args, "-append", cmdline)
	path := cachePath(dir, "fwcfg", string(verLine), strings.Join(args, "\x00"))
	var c cachedBoot
	if ok, err := readCache(path, &c); err != nil {
		return nil, ver, fmt.Errorf("fw_cfg boot cache: %w", err)
	} else if ok {
		if boot := c.rebuild(kernel, initrd); boot != nil {
			return boot, ver, nil
		}
	}
	boot, err := DumpBootBlobs(ctx, m, kernel, initrd, cmdline)
	if err != nil {
		return nil, ver, err
	}
	if path != "" {
		c := cachedBoot{
			QEMU: strings.TrimSpace(string(verLine)), Args: args, Setup: boot.Setup,
			KernelData: sha256Hex(boot.KernelData), InitrdAddr: boot.InitrdAddr, Cmdline: boot.Cmdline,
		}
		if boot.BootKernel != nil {
			c.BootKernel = sha256Hex(boot.BootKernel)
		}
		if boot.Initrd != nil {
			c.Initrd = sha256Hex(boot.Initrd)
		}
		if err := writeCache(path, c); err != nil {
			return boot, ver, fmt.Errorf("%w: fw_cfg boot items: %w", ErrCacheWrite, err)
		}
	}
	return boot, ver, nil
}

// rebuild returns the boot items the entry records for kernel and initrd,
// or nil when the entry does not fit them (damaged or edited).
func (c *cachedBoot) rebuild(kernel, initrd []byte) *FwCfgBoot {
	n := len(c.Setup)
	if n == 0 || n > len(kernel) || sha256Hex(kernel[n:]) != c.KernelData {
		return nil
	}
	b := &FwCfgBoot{Setup: c.Setup, KernelData: kernel[n:], InitrdAddr: c.InitrdAddr, Cmdline: c.Cmdline}
	switch c.BootKernel {
	case "":
	case sha256Hex(kernel):
		b.BootKernel = kernel
	default:
		return nil
	}
	switch {
	case initrd == nil && c.Initrd == "":
	case initrd != nil && c.Initrd == sha256Hex(initrd):
		b.Initrd = initrd
	default:
		return nil
	}
	// The setup sectors are the kernel's, patched by QEMU in the header
	// only: outside the header (0x1f1 up to 0x280) they must match.
	const hdrStart, hdrEnd = setupSects, 0x280
	if n < hdrEnd || !bytes.Equal(c.Setup[:hdrStart], kernel[:hdrStart]) || !bytes.Equal(c.Setup[hdrEnd:], kernel[hdrEnd:n]) {
		return nil
	}
	return b
}
