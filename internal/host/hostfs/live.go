package hostfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"syscall"
	"time"
)

// DefaultTimeout bounds every command run on a live root: discovery must
// stay fast even when a host binary hangs.
const DefaultTimeout = 2 * time.Second

// maxOutput caps what is kept of a command's stdout and of its stderr, so
// that a chatty binary cannot bloat Facts or memory.
const maxOutput = 64 << 10

// commandEnv is the whole environment of a command: the caller's
// environment (proxies, tokens, locale) must not leak into or change what a
// host binary prints.
func commandEnv() []string {
	return []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LC_ALL=C",
		"HOME=/",
	}
}

// Live is a live host root: the running system at "/", or the running host
// mounted elsewhere (the DaemonSet mounts it at /host) when the user says it
// is live. Commands on a root other than "/" run chrooted into it, so that
// the host's own binaries and libraries answer.
type Live struct {
	path string
	fsys *confinedFS
	// Timeout bounds each command; zero means DefaultTimeout.
	Timeout time.Duration
}

// NewLive returns the live root at dir ("/" or a mounted host).
func NewLive(dir string) (*Live, error) { return newLiveWith(dir, confineOptions{}) }

// newLiveWith is NewLive with opt's fallbacks.
func newLiveWith(dir string, opt confineOptions) (*Live, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening live root %s: %w", dir, err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("opening live root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("opening live root %s: not a directory", abs)
	}
	// "/" goes through the same layer: confinement is then a no-op, but
	// reads still take regular files only, with a cap.
	c, err := newConfinedFS(abs, opt)
	if err != nil {
		return nil, fmt.Errorf("opening live root: %w", err)
	}
	return &Live{path: abs, fsys: c}, nil
}

// FS implements Root.
func (l *Live) FS() FS { return l.fsys }

// Live implements Root.
func (l *Live) Live() bool { return true }

// Path implements Root.
func (l *Live) Path() string { return l.path }

// Probe implements Root: on a live root the caller performs the probe.
func (l *Live) Probe(string, any) error { return ErrOffline }

// Run implements Root. argv[0] must be an absolute, clean path inside the
// root; on a root other than "/" the command runs chrooted into the root so
// that neither the path nor the libraries can resolve outside it. The
// command gets a minimal environment, no stdin, capped output, and its whole
// process group is killed when the timeout expires.
func (l *Live) Run(ctx context.Context, argv ...string) (CommandResult, error) {
	res := CommandResult{Argv: argv}
	bin, err := checkArgv0(argv)
	if err != nil {
		res.Error = err.Error()
		return res, err
	}
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// Its own group, killed whole on timeout; and killed with berth if
	// berth dies first (probe.QEMU says why that is safe in Go).
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if l.path != "/" {
		attr.Chroot = l.path
	}
	cmd := exec.CommandContext(ctx, bin, argv[1:]...)
	// exec.Command resolves relative names with LookPath on our PATH;
	// argv[0] is absolute so it is used as is, inside the chroot.
	cmd.Path = bin
	cmd.Dir = "/"
	cmd.Env = commandEnv()
	cmd.SysProcAttr = attr
	var stdout, stderr cappedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Cancel = func() error {
		// Negative pid: the whole group, so that children of a shell
		// wrapper die too.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 200 * time.Millisecond

	err = cmd.Run()
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		res.Error = fmt.Sprintf("timed out after %s", timeout)
		return res, fmt.Errorf("running %s: %s", bin, res.Error)
	case errors.As(err, &exitErr):
		// A non-zero exit is an answer, not a failure to run.
		return res, nil
	default:
		res.Error = err.Error()
		return res, fmt.Errorf("running %s: %w", bin, err)
	}
}

// checkArgv0 insists on an absolute, clean path without "..", so that a
// command is always resolved inside the root (with chroot the kernel
// enforces the rest).
func checkArgv0(argv []string) (string, error) {
	if len(argv) == 0 || argv[0] == "" {
		return "", errors.New("running command: empty argv")
	}
	bin := argv[0]
	if !path.IsAbs(bin) || path.Clean(bin) != bin {
		return "", fmt.Errorf("running %q: argv[0] must be an absolute clean path inside the root", bin)
	}
	return bin, nil
}

// cappedBuffer keeps the first maxOutput bytes and drops the rest while
// still accepting writes, so the child never blocks on a full pipe.
type cappedBuffer struct {
	buf       bytes.Buffer
	truncated bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
			c.truncated = true
		} else {
			c.buf.Write(p)
		}
	} else if len(p) > 0 {
		c.truncated = true
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	if c.truncated {
		return c.buf.String() + truncatedMark
	}
	return c.buf.String()
}

// truncatedMark ends an output cut at maxOutput bytes.
const truncatedMark = "\n[output truncated]"

// capOutput cuts s as cappedBuffer does; an output already cut is
// returned unchanged.
func capOutput(s string) string {
	if len(s) <= maxOutput || (len(s) == maxOutput+len(truncatedMark) && s[maxOutput:] == truncatedMark) {
		return s
	}
	return s[:maxOutput] + truncatedMark
}

// capOutputs applies the output cap to a result that did not come from
// running the command here (a recorded-outputs file, a recorder).
func capOutputs(r *CommandResult) {
	r.Stdout, r.Stderr = capOutput(r.Stdout), capOutput(r.Stderr)
}

// RawReader is implemented by live roots that can open a file for reading
// without the read being captured into a snapshot: discovery reads
// megabytes of a binary (or the package database) to learn one version
// string, and records only that string (with RecordProbe).
type RawReader interface {
	// OpenRaw opens name (slash-separated, relative to the root) for
	// reading; it never leaves the root, not even through symlinks.
	OpenRaw(name string) (*os.File, error)
}

// OpenRaw implements RawReader through the confined layer: neither ".."
// nor a symlink can lead outside the root, and only a regular file is
// opened.
func (l *Live) OpenRaw(name string) (*os.File, error) {
	return l.fsys.OpenRaw(name)
}

// OpenDevice opens the character device name (slash-separated, relative to
// the root: "dev/kvm") with flags, resolved inside the root like every
// read; anything but a character device is refused unopened. It returns
// the raw descriptor for ioctls, which the caller closes. Live probes
// should open device nodes through it rather than by host path.
func (l *Live) OpenDevice(name string, flags int) (int, error) {
	return l.fsys.openCharDevice(name, flags)
}

// KernelLogReader is implemented by live roots that can read the kernel
// ring buffer directly (/dev/kmsg) rather than a saved copy.
type KernelLogReader interface {
	// KernelLog returns the message text of every record currently in the
	// ring buffer, one per line, without kmsg headers.
	KernelLog() ([]byte, error)
}

// maxKernelLog caps what is read from /dev/kmsg.
const maxKernelLog = 4 << 20

// kmsgRecordMax is the most one read of /dev/kmsg returns: the kernel
// refuses (EINVAL) a buffer too small for the next record, and none is
// larger than this (CONSOLE_EXT_LOG_MAX).
const kmsgRecordMax = 8192

// kmsgFirstSize is the first capacity of the text: a log of ~2,000
// records holds ~100 KB of messages.
const kmsgFirstSize = 128 << 10

// KernelLog implements KernelLogReader by reading dev/kmsg of the root
// without blocking: each read returns one record; EAGAIN means the end of
// the buffer was reached.
//
// Each record is read straight after the text kept so far and cut down
// to its message there. The text grows by made (not appended) buffers:
// append zeroes all of a new capacity before it is written, and on the
// fresh heap of a short-lived process each 4 KiB touched is a page fault
// (3-4 µs in a VM); a bytes.Buffer fed from a separate record buffer cost
// 50 of them on a 96 KB log (perf record -e page-faults), this 24.
func (l *Live) KernelLog() ([]byte, error) {
	k, err := l.OpenKernelLog()
	if err != nil {
		return nil, err
	}
	defer k.Close()
	return readKernelLog(k.fd, kmsgFirstSize)
}

// KernelLogStream is dev/kmsg held open by a long-running process (the
// agent discovers every interval): the kernel keeps each open file's
// place in the ring buffer, so each ReadNew returns only the records
// added since the one before, and a quiet node costs one read(2) an
// interval instead of the whole buffer's two thousand.
type KernelLogStream struct {
	fd int
}

// OpenKernelLog opens dev/kmsg of the root (through the root like every
// read, and only a character device) for ReadNew.
func (l *Live) OpenKernelLog() (*KernelLogStream, error) {
	fd, err := l.fsys.openCharDevice("dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	return &KernelLogStream{fd: fd}, nil
}

// ReadNew returns the message text of the records the kernel added since
// the last ReadNew (the first: all in the ring buffer), as KernelLog.
// Records overwritten before they were read are skipped.
func (k *KernelLogStream) ReadNew() ([]byte, error) {
	// Room for two records: after the first read, a few records at most.
	return readKernelLog(k.fd, 2*kmsgRecordMax+2)
}

// Close closes dev/kmsg.
func (k *KernelLogStream) Close() error {
	return syscall.Close(k.fd)
}

// readKernelLog reads the kmsg records of fd into a text of first bytes'
// capacity at first.
func readKernelLog(fd, first int) ([]byte, error) {
	out := make([]byte, 0, first)
	for len(out) < maxKernelLog {
		if cap(out)-len(out) < kmsgRecordMax+1 {
			grown := make([]byte, len(out), max(2*cap(out), 4*kmsgRecordMax))
			copy(grown, out)
			out = grown
		}
		n, err := syscall.Read(fd, out[len(out):cap(out)-1])
		switch {
		case err == syscall.EAGAIN:
			return out, nil
		case err == syscall.EPIPE:
			// The record we were about to read was overwritten: carry on
			// with the next one.
			continue
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: "dev/kmsg", Err: err}
		case n == 0:
			return out, nil
		}
		out = keepKmsgMessage(out, n)
	}
	return out, nil
}

// keepKmsgMessage cuts the kmsg record of n bytes just read after the end
// of out ("pri,seq,usec,flags;text\n KEY=value\n...", within out's
// capacity, with a byte to spare) down to its message followed by a
// newline, in place; continuation (dictionary) lines are dropped.
func keepKmsgMessage(out []byte, n int) []byte {
	rec := out[len(out) : len(out)+n]
	if i := bytes.IndexByte(rec, ';'); i >= 0 {
		rec = rec[i+1:]
	}
	if i := bytes.IndexByte(rec, '\n'); i >= 0 {
		rec = rec[:i]
	}
	// The message moves left, onto the header it follows.
	out = out[:len(out)+copy(out[len(out):cap(out)], rec)]
	return append(out, '\n')
}
