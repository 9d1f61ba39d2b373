package discover

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probeBAR0 reads the 32-bit registers at offs from a PCI device's BAR0
// through the file open returns (its sysfs resource0; name is for
// messages). The kernel implements resource0 of a memory BAR with mmap
// only (drivers/pci/pci-sysfs.c gives it no read method), so each
// register's page is mapped read-only and shared, read with one aligned
// 32-bit load (device registers must not be read byte by byte), and
// unmapped. A test maps a plain file the same way.
func probeBAR0(open func() (*os.File, error), name string, offs []uint32) bar0Device {
	var d bar0Device
	f, err := open()
	if err != nil {
		return bar0Err(d, "open "+name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return bar0Err(d, "stat "+name, err)
	}
	size := fi.Size()
	page := int64(os.Getpagesize())
	d.Registers = make(map[string]string, len(offs))
	for _, off := range offs {
		if off%4 != 0 || int64(off)+4 > size {
			d.Registers = nil
			d.Error = fmt.Sprintf("%s: BAR0 is %d bytes, register %#x is outside it", name, size, off)
			return d
		}
		base := int64(off) &^ (page - 1)
		length := min(page, size-base)
		mem, err := unix.Mmap(int(f.Fd()), base, int(length), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			d.Registers = nil
			return bar0Err(d, fmt.Sprintf("mmap %s at %#x", name, base), err)
		}
		v := atomic.LoadUint32((*uint32)(unsafe.Pointer(&mem[int64(off)-base])))
		if err := unix.Munmap(mem); err != nil {
			d.Registers = nil
			return bar0Err(d, "munmap "+name, err)
		}
		d.Registers[fmt.Sprintf("%#x", off)] = fmt.Sprintf("0x%08x", v)
	}
	return d
}

func bar0Err(d bar0Device, op string, err error) bar0Device {
	var en syscall.Errno
	if errors.As(err, &en) {
		d.Errno = unix.ErrnoName(en)
	}
	d.Error = fmt.Sprintf("%s: %v", op, err)
	return d
}
