package discover

import (
	"io/fs"
	"syscall"
	"time"
)

// changeTime returns the inode change time of fi: unlike the modification
// time, which dpkg sets from the package and tools can set at will, it
// moves whenever the file is written, replaced, chmod'ed or chown'ed.
func changeTime(fi fs.FileInfo) (time.Time, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(st.Ctim.Unix()), true
}

// identify returns what changes when fi's file is replaced or written:
// device, inode, size, modification and change time.
func identify(fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true
}
