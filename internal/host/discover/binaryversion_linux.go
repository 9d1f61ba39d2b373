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
