// Package discover reads a host root into Facts. Each subsystem lives in its
// own file, writes only its own section of Facts, and records what it could
// not determine as unknown with a reason; no error aborts discovery.
// Discovery knows nothing of platforms: it reports what is there.
package discover

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"time"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/platform"
)

// Options configure one discovery run.
type Options struct {
	// Now is the clock; tests pass a fixed one.
	Now func() time.Time
	// Probe enables live probes that start processes (the QEMU probe) or
	// map device memory (the NVIDIA GPUs' CC-mode registers in BAR0).
	// Cheap live probes (KVM and SEV ioctls) run on every live root.
	Probe bool
	// PCIIDs is a pci.ids database on the machine berth runs on, used when
	// the host root has none; empty means none (PCI names stay empty).
	PCIIDs string
	// ExecPlugins allows running the executable host checks under
	// /etc/berth/checks.d (berth check --exec-plugins); off by default
	// because they run as root.
	ExecPlugins bool
	// Layout is the runtime layout of a custom distribution (berth config
	// --containerd-config ...): the runtime's files are read from it,
	// named "custom", instead of the detected distribution's.
	Layout *platform.Layout
	// QEMUPath is the QEMU to probe instead of the one a berth or
	// kata-deploy install put under /opt/berth or /opt/kata (berth check
	// --hypervisor-path), relative to the root or absolute in it.
	QEMUPath string
	// ProbeTimeout bounds the QEMU probe; zero means 5 s.
	ProbeTimeout time.Duration
	// PluginTimeout bounds each executable check; zero means 10 s.
	PluginTimeout time.Duration
	// Network, when set, probes services over the network (berth check
	// --network); nil records them as not checked.
	Network *NetworkProbe
	// Log receives per-subsystem timings at debug level; nil discards.
	Log *slog.Logger
	// KernelLog, when set, reads a live root's dev/kmsg incrementally
	// across runs (a long-running agent); nil reads it whole each run.
	KernelLog *KernelLogFollower
	// Cache, when set, keeps what was read from files that rarely change
	// (binaries' static versions, PCI names) across runs while those
	// files are unchanged (a long-running agent); nil reads them each run.
	Cache *FileCache
}

// subsystem fills its own part of f.
type subsystem struct {
	name string
	run  func(ctx context.Context, s *session, f *facts.Facts)
}

// Run discovers the facts of root.
func Run(ctx context.Context, root hostfs.Root, opt Options) *facts.Facts {
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	f := &facts.Facts{
		SchemaVersion: facts.SchemaVersion,
		Root:          root.Path(),
		Live:          root.Live(),
		CollectedAt:   now().UTC(),
	}
	s := &session{root: root, opt: opt}
	var wg sync.WaitGroup
	// The kernel log is the longest single read (one read(2) per record,
	// a thousand or more) and two subsystems wait for it: it starts
	// first, on its own, so that it overlaps everything else rather than
	// being one subsystem's tail.
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.bootLines()
	}()
	for _, sub := range subsystems() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			sub.run(ctx, s, f)
			if opt.Log != nil {
				opt.Log.Debug("discovered", "subsystem", sub.name, "took", time.Since(start))
			}
		}()
	}
	wg.Wait()
	f.Unknown = s.unknown
	f.SortUnknown()
	return f
}

// session is shared by the subsystems of one run: the root, memoised reads
// that several subsystems need, and the unknown-facts collector.
type session struct {
	root hostfs.Root
	opt  Options

	mu      sync.Mutex
	unknown []facts.Missing

	bootOnce sync.Once
	bootLog  []string
	bootSrc  string
	bootErr  string

	cpuinfoOnce sync.Once
	cpuinfo     cpuInfo
	cpuinfoOK   bool

	cmdlineOnce sync.Once
	cmdline     string
	cmdlineOK   bool

	cpuidOnce sync.Once
	cpuid     *facts.CPUID

	osOnce   sync.Once
	osKV     map[string]string
	osReason string
}

// procCmdline returns the kernel command line, read once per run. The
// reason it is missing is recorded under kernel.cmdline.
func (s *session) procCmdline() (string, bool) {
	s.cmdlineOnce.Do(func() {
		s.cmdline, s.cmdlineOK = s.readString("kernel.cmdline", "proc/cmdline")
	})
	return s.cmdline, s.cmdlineOK
}

// unknownf records that field could not be determined.
func (s *session) unknownf(field, reason string, args ...any) {
	if len(args) > 0 {
		reason = fmt.Sprintf(reason, args...)
	}
	s.mu.Lock()
	s.unknown = append(s.unknown, facts.Missing{Field: field, Reason: reason})
	s.mu.Unlock()
}

// readFile reads a file of the root. On failure it records field as
// unknown with the reason (missing, permission denied, ...) and returns
// ok=false. Pass field "" to read quietly (for optional files).
func (s *session) readFile(field, path string) ([]byte, bool) {
	b, err := s.root.FS().ReadFile(path)
	if err != nil {
		if field != "" {
			s.unknownf(field, "%s", ReadReason(path, err))
		}
		return nil, false
	}
	return b, true
}

// readString reads a sysfs-style file and trims the trailing newline and
// surrounding spaces.
func (s *session) readString(field, path string) (string, bool) {
	b, ok := s.readFile(field, path)
	if !ok {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// exists reports whether path exists in the root (without following a
// final symlink).
func (s *session) exists(path string) bool {
	_, err := s.root.FS().Lstat(path)
	return err == nil
}

// ReadReason turns a read error into an unknown-fact reason. The host
// root's own refusals read "not a regular file (FIFO): <path>", "larger
// than <n> bytes: <path>" and "truncated in snapshot: <path> (...)".
func ReadReason(path string, err error) string {
	var (
		notReg    *hostfs.NotRegularError
		tooLarge  *hostfs.TooLargeError
		truncated *hostfs.TruncatedError
	)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return facts.ReasonMissing + ": " + path
	case errors.Is(err, fs.ErrPermission):
		return facts.ReasonPermission + ": " + path
	case errors.As(err, &notReg):
		return fmt.Sprintf("not a regular file (%s): %s", notReg.Kind, path)
	case errors.As(err, &tooLarge):
		return fmt.Sprintf("larger than %d bytes: %s", tooLarge.Limit, path)
	case errors.As(err, &truncated):
		if truncated.Size > 0 {
			return fmt.Sprintf("truncated in snapshot: %s (%d of %d bytes kept)", path, truncated.Kept, truncated.Size)
		}
		return fmt.Sprintf("truncated in snapshot: %s (%d bytes kept)", path, truncated.Kept)
	default:
		return fmt.Sprintf("unreadable: %s: %v", path, err)
	}
}

// unparseable formats a parse failure reason naming the file and line.
func unparseable(path string, line int, what string) string {
	if line > 0 {
		return fmt.Sprintf("%s: %s:%d: %s", facts.ReasonUnparseable, path, line, what)
	}
	return fmt.Sprintf("%s: %s: %s", facts.ReasonUnparseable, path, what)
}
