package refvalues

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Where RTMR1 and RTMR2's inputs came from (RTMRValues.Source).
const (
	// SourceFwCfg: the kernel, initrd and command line as QEMU handed them
	// to the firmware through fw_cfg, read from QEMU itself.
	SourceFwCfg = "qemu-fw_cfg"
	// SourceModel: berth's model of what QEMU hands over (its setup-header
	// patch and initrd placement before QEMU 10), used when no QEMU was
	// asked.
	SourceModel = "model"
)

// fw_cfg items of a Linux direct boot (QEMU
// include/standard-headers/linux/qemu_fw_cfg.h). Sizes and addresses are
// 32-bit little-endian; the data items hold the bytes.
const (
	fwCfgKernelSize  = 0x08
	fwCfgInitrdAddr  = 0x0a
	fwCfgInitrdSize  = 0x0b
	fwCfgKernelData  = 0x11
	fwCfgInitrdData  = 0x12
	fwCfgCmdlineSize = 0x14
	fwCfgCmdlineData = 0x15
	fwCfgSetupSize   = 0x17
	fwCfgSetupData   = 0x18
	// fwCfgBootKernel is the whole kernel file without QEMU's setup-header
	// patch, which QEMU offers from 10.0 on (hw/i386/x86-common.c
	// x86_load_linux) next to the patched FW_CFG_SETUP_DATA.
	fwCfgBootKernel = "etc/boot/kernel"
)

// FwCfgBoot is what QEMU hands the firmware for a direct boot (-kernel,
// -initrd, -append), read back from QEMU through fw_cfg: the bytes the
// firmware loads and measures, so berth needs no model of QEMU's loader.
type FwCfgBoot struct {
	// Setup is FW_CFG_SETUP_DATA: the kernel's real-mode setup sectors,
	// with the boot-protocol header as this QEMU patched it.
	Setup []byte
	// KernelData is FW_CFG_KERNEL_DATA: the rest of the kernel file.
	KernelData []byte
	// BootKernel is the fw_cfg file etc/boot/kernel (QEMU 10 and later):
	// the kernel file unpatched; nil when QEMU offers no such file.
	BootKernel []byte
	// Initrd is FW_CFG_INITRD_DATA; nil without an initrd.
	Initrd []byte
	// InitrdAddr is FW_CFG_INITRD_ADDR, where QEMU placed the initrd (and
	// wrote into a patched setup header).
	InitrdAddr uint32
	// Cmdline is FW_CFG_CMDLINE_DATA up to its terminating NUL.
	Cmdline string
}

// FirmwareKernel returns the kernel image the firmware assembles and
// measures. From QEMU 10 on it is etc/boot/kernel, the file as given: a
// TD's QEMU does not patch the setup header of a confidential guest, and
// berth's QEMU, run without TDX hardware, cannot be one, so its patched
// FW_CFG_SETUP_DATA is not what a TD receives. Before 10 there is no
// unpatched copy and the TDX QEMUs of that time hand the patched setup
// followed by the rest of the kernel (edk2 QemuKernelLoaderFsDxe joins the
// two items into its "kernel" file).
func (b *FwCfgBoot) FirmwareKernel(qemuMajor int) []byte {
	if qemuMajor >= 10 && b.BootKernel != nil {
		return b.BootKernel
	}
	return append(append(make([]byte, 0, len(b.Setup)+len(b.KernelData)), b.Setup...), b.KernelData...)
}

// DumpBootBlobs starts QEMU stopped, with the qtest server, for machine m
// directly booting kernel (with initrd when not nil, and the command line
// cmdline), and reads back through fw_cfg what QEMU hands the firmware.
// The bytes reach QEMU through memory files (memfd) inherited as
// /dev/fd/N: QEMU loads exactly the bytes berth read and hashed, and
// nothing is written to disk.
func DumpBootBlobs(ctx context.Context, m QEMUMachine, kernel, initrd []byte, cmdline string) (*FwCfgBoot, error) {
	if m.Binary == "" {
		return nil, fmt.Errorf("no QEMU binary given to hand the kernel to")
	}
	if len(kernel) == 0 {
		return nil, fmt.Errorf("no kernel given: QEMU has nothing to hand the firmware")
	}
	files := []*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	args := m.Args()
	for _, c := range []struct {
		opt, name string
		data      []byte
	}{{"-kernel", "berth-kernel", kernel}, {"-initrd", "berth-initrd", initrd}} {
		if c.data == nil {
			continue
		}
		f, err := memFile(c.name, c.data)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		args = append(args, c.opt, fmt.Sprintf("/dev/fd/%d", 2+len(files)))
	}
	args = append(args, "-append", cmdline)
	var b *FwCfgBoot
	err := runQtest(ctx, m, args, files, 0, func(q *qtest) (err error) {
		b, err = q.dumpBoot()
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := b.check(kernel, initrd, cmdline); err != nil {
		return nil, fmt.Errorf("%s: %w", m.Binary, err)
	}
	return b, nil
}

// memFile returns a memory file holding data, positioned at its start.
func memFile(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd for the %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd for the %s: %w", name, err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("memfd for the %s: %w", name, err)
	}
	return f, nil
}

// dumpBoot reads the direct-boot items.
func (q *qtest) dumpBoot() (*FwCfgBoot, error) {
	u32 := func(sel uint16) (uint32, error) {
		b, err := q.read(sel, 4)
		if err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint32(b), nil
	}
	item := func(sizeSel, dataSel uint16, what string) ([]byte, error) {
		n, err := u32(sizeSel)
		if err != nil {
			return nil, err
		}
		if n > maxInitrdSize {
			return nil, fmt.Errorf("fw_cfg %s item of %d bytes", what, n)
		}
		return q.readLarge(dataSel, n)
	}
	b := &FwCfgBoot{}
	var err error
	if b.Setup, err = item(fwCfgSetupSize, fwCfgSetupData, "setup"); err != nil {
		return nil, err
	}
	if b.KernelData, err = item(fwCfgKernelSize, fwCfgKernelData, "kernel"); err != nil {
		return nil, err
	}
	if b.Initrd, err = item(fwCfgInitrdSize, fwCfgInitrdData, "initrd"); err != nil {
		return nil, err
	}
	if len(b.Initrd) == 0 {
		b.Initrd = nil
	} else if b.InitrdAddr, err = u32(fwCfgInitrdAddr); err != nil {
		return nil, err
	}
	cmd, err := item(fwCfgCmdlineSize, fwCfgCmdlineData, "command line")
	if err != nil {
		return nil, err
	}
	b.Cmdline = string(cmd)
	if i := bytes.IndexByte(cmd, 0); i >= 0 {
		b.Cmdline = string(cmd[:i])
	}
	files, err := q.fileDir()
	if err != nil {
		return nil, err
	}
	if e, ok := files[fwCfgBootKernel]; ok {
		if e.size > maxKernelSize {
			return nil, fmt.Errorf("fw_cfg file %q has %d bytes", fwCfgBootKernel, e.size)
		}
		if b.BootKernel, err = q.readLarge(e.sel, e.size); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// check compares what QEMU handed over with what it was given, in the
// parts QEMU passes on unchanged: a QEMU that handed over another kernel,
// initrd or command line than berth gave it (a wrapper script that
// substitutes its own -kernel, say) would make every value wrong.
func (b *FwCfgBoot) check(kernel, initrd []byte, cmdline string) error {
	switch {
	case len(b.Setup) == 0 || len(b.Setup)+len(b.KernelData) != len(kernel):
		return fmt.Errorf("fw_cfg setup and kernel items have %d+%d bytes, the kernel given %d", len(b.Setup), len(b.KernelData), len(kernel))
	case !bytes.Equal(b.KernelData, kernel[len(b.Setup):]):
		return fmt.Errorf("fw_cfg kernel item differs from the kernel given after its %d-byte setup", len(b.Setup))
	case b.BootKernel != nil && !bytes.Equal(b.BootKernel, kernel):
		return fmt.Errorf("fw_cfg file %s differs from the kernel given", fwCfgBootKernel)
	case !bytes.Equal(b.Initrd, initrd):
		return fmt.Errorf("fw_cfg initrd item (%d bytes) differs from the initrd given (%d bytes)", len(b.Initrd), len(initrd))
	case b.Cmdline != cmdline:
		return fmt.Errorf("fw_cfg command line %q differs from the one given, %q", b.Cmdline, cmdline)
	}
	return nil
}

// bootSourceText says in the table output where RTMR1 and RTMR2's inputs
// came from.
func bootSourceText(source string) string {
	switch source {
	case SourceFwCfg:
		return SourceFwCfg + " (kernel, initrd and command line as QEMU hands them to the firmware)"
	case SourceModel:
		return SourceModel + " (berth's model of QEMU's kernel loader; no QEMU was asked)"
	}
	return source
}

// sourceNote says in the exports, whose formats have no field for it,
// where RTMR1 and RTMR2's inputs came from.
func (r *RTMRValues) sourceNote() string {
	return fmt.Sprintf("RTMR1, RTMR2: source %s", bootSourceText(r.Source))
}

// checkBzImage refuses a kernel QEMU would not hand the firmware as a
// bzImage: one without the Linux x86 setup header (QEMU then tries it as
// a multiboot or ELF kernel) or whose header describes more than the file
// holds (checkSetup).
func checkBzImage(kernel []byte) error {
	if len(kernel) < setupHdrS+4 || string(kernel[setupHdrS:setupHdrS+4]) != "HdrS" {
		return fmt.Errorf("kernel has no Linux x86 setup header (\"HdrS\" at offset %#x): a direct-boot TDX kernel is an EFI-stub bzImage, which QEMU hands the firmware through fw_cfg", setupHdrS)
	}
	return checkSetup(kernel, int64(len(kernel)))
}
