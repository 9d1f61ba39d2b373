package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"

	"berth.dev/berth/internal/host/facts"
)

// KVM ioctls (include/uapi/linux/kvm.h): _IO(KVMIO=0xAE, 0x00) and 0x01.
const (
	kvmGetAPIVersion = 0xAE00
	kvmCreateVM      = 0xAE01
	// kvmAPIVersion is the only API version Linux has ever reported.
	kvmAPIVersion = 12
)

// probeKVM opens /dev/kvm through open (the host's, possibly under a
// mounted root: the devices are those of the running kernel either way;
// name is for messages), checks the API version and creates and destroys
// one empty VM. EBUSY from KVM_CREATE_VM means another hypervisor
// (VirtualBox, VMware) holds VT-x/AMD-V.
func probeKVM(open func() (int, error), name string) facts.KVMProbe {
	var p facts.KVMProbe
	fd, err := open()
	if err != nil {
		return errnoProbe(p, "open "+name, err)
	}
	defer unix.Close(fd)
	p.Opened = true
	v, err := unix.IoctlRetInt(fd, kvmGetAPIVersion)
	if err != nil {
		return errnoProbe(p, "KVM_GET_API_VERSION", err)
	}
	p.APIVersion = v
	if v != kvmAPIVersion {
		p.Error = fmt.Sprintf("KVM_GET_API_VERSION returned %d, expected %d", v, kvmAPIVersion)
		return p
	}
	vm, err := unix.IoctlRetInt(fd, kvmCreateVM)
	if err != nil {
		return errnoProbe(p, "KVM_CREATE_VM", err)
	}
	unix.Close(vm)
	p.CreateVM = true
	return p
}

func errnoProbe(p facts.KVMProbe, op string, err error) facts.KVMProbe {
	var en syscall.Errno
	if errors.As(err, &en) {
		p.Errno = unix.ErrnoName(en)
	}
	p.Error = fmt.Sprintf("%s: %v", op, err)
	return p
}

// accessRW reports whether the invoking user (effective ids) may open p
// read-write, without opening it: opening some nodes has side effects
// (dev/vhost-vsock loads a module).
func accessRW(p string) bool {
	return unix.Faccessat(unix.AT_FDCWD, p, unix.R_OK|unix.W_OK, unix.AT_EACCESS) == nil
}

// fileOwner returns the owner of a file examined through os.DirFS.
func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
