package discover

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SEV platform commands (include/uapi/linux/psp-sev.h, enum of SEV
// commands) and SEV_ISSUE_CMD = _IOWR('S', 0x0, struct sev_issue_cmd),
// whose argument is packed: u32 cmd, u64 data, u32 error (16 bytes). Both
// commands only read: the kernel lets them through a read-only open.
const (
	sevCmdGetID2          = 8
	sevCmdSNPPlatformStat = 9
	sevIssueCmd           = 0xC0105300
)

// probeSEV issues SNP_PLATFORM_STATUS and SEV_GET_ID2 on the device open
// returns (name is for messages).
func probeSEV(open func() (int, error), name string) sevProbe {
	var p sevProbe
	fd, err := open()
	if err != nil {
		return sevErr(p, "open "+name, err, 0)
	}
	defer unix.Close(fd)
	status := make([]byte, snpStatusSize)
	if fwErr, err := sevIssue(fd, sevCmdSNPPlatformStat, unsafe.Pointer(&status[0])); err != nil {
		return sevErr(p, "SNP_PLATFORM_STATUS", err, fwErr)
	}
	runtime.KeepAlive(status)
	p.SNPPlatformStatus = hex.EncodeToString(status)
	// struct sev_user_data_get_id2: u64 address, u32 length (packed).
	id := make([]byte, maxChipID)
	arg := make([]byte, 12)
	binary.LittleEndian.PutUint64(arg, uint64(uintptr(unsafe.Pointer(&id[0]))))
	binary.LittleEndian.PutUint32(arg[8:], uint32(len(id)))
	fwErr, err := sevIssue(fd, sevCmdGetID2, unsafe.Pointer(&arg[0]))
	runtime.KeepAlive(id)
	if err != nil {
		p.ChipIDError = fmt.Sprintf("SEV_GET_ID2: %v (firmware error %#x)", err, fwErr)
		return p
	}
	n := binary.LittleEndian.Uint32(arg[8:])
	if n == 0 || n > uint32(len(id)) || n%chipIDSize != 0 {
		p.ChipIDError = fmt.Sprintf("SEV_GET_ID2 returned %d bytes, expected a multiple of %d up to %d", n, chipIDSize, len(id))
		return p
	}
	p.ChipID = hex.EncodeToString(id[:n])
	return p
}

// sevIssue runs one SEV_ISSUE_CMD; the firmware's status code comes back
// in the argument's error field.
func sevIssue(fd int, cmd uint32, data unsafe.Pointer) (uint32, error) {
	var arg [16]byte
	binary.LittleEndian.PutUint32(arg[0:], cmd)
	binary.LittleEndian.PutUint64(arg[4:], uint64(uintptr(data)))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), sevIssueCmd, uintptr(unsafe.Pointer(&arg[0])))
	fwErr := binary.LittleEndian.Uint32(arg[12:])
	if errno != 0 {
		return fwErr, errno
	}
	return fwErr, nil
}

func sevErr(p sevProbe, op string, err error, fwErr uint32) sevProbe {
	var en syscall.Errno
	if errors.As(err, &en) {
		p.Errno = unix.ErrnoName(en)
	}
	p.Error = fmt.Sprintf("%s: %v", op, err)
	if fwErr != 0 {
		p.Error += fmt.Sprintf(" (firmware error %#x)", fwErr)
	}
	return p
}
