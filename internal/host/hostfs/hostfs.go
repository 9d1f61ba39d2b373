// Package hostfs is the host root through which every read of discovery
// goes: the live "/", a directory (a fixture tree, or a live host mounted at
// /host), or an unpacked snapshot. Every kind resolves paths inside the
// root as a chroot would (absolute symlinks taken relative to the root,
// ".." stopping at it; see confinedFS), reads regular files only, and caps
// every read. Commands run only on a live root; on an offline root their
// outputs come from a recorded-outputs file and nothing from the root is
// ever executed.
package hostfs

import (
	"context"
	"errors"
	"io/fs"
)

// ErrOffline is returned by Run and by live probes on an offline root that
// has no recorded value for the request.
var ErrOffline = errors.New("offline root")

// CommandResult is the outcome of running (or looking up) one command.
type CommandResult struct {
	// Argv is the command line as requested, argv[0] as an absolute path
	// inside the host root.
	Argv     []string `json:"argv"`
	Stdout   string   `json:"stdout"`
	Stderr   string   `json:"stderr,omitempty"`
	ExitCode int      `json:"exitCode"`
	// Error is set when the command could not be started or timed out.
	Error string `json:"error,omitempty"`
	// Recorded is true when the result came from a snapshot or fixture
	// rather than from running the command now.
	Recorded bool `json:"recorded,omitempty"`
}

// Root is a host root. All paths are slash-separated and relative to the
// root ("proc/cpuinfo", never "/proc/cpuinfo"), as in io/fs.
type Root interface {
	// FS gives read access to files, directory listings and symlink
	// targets (it implements fs.ReadFileFS, fs.ReadDirFS and fs.ReadLinkFS).
	FS() FS
	// Live reports whether live probes (ioctls, running binaries) may run.
	Live() bool
	// Path describes the root for humans and reports ("/", "/host",
	// "snapshot.tar.gz").
	Path() string
	// Run runs argv (argv[0] a path inside the root) with a timeout on a
	// live root, in the host's context; on an offline root it returns the
	// recorded result or ErrOffline.
	Run(ctx context.Context, argv ...string) (CommandResult, error)
	// Probe returns a recorded live-probe value by name on an offline root
	// (for example "kvm"), decoding it into v; on a live root it returns
	// ErrOffline so that the caller performs the probe itself.
	Probe(name string, v any) error
}

// FS is the read interface of a host root. Paths are resolved inside the
// root; ReadFile and Open take regular files (and Open directories) only,
// failing with a *NotRegularError for a FIFO, socket or device (which is
// never opened), and read at most DefaultMaxFile bytes (a *TooLargeError
// beyond; ReadFileLimit sets another cap). Stat and Lstat take anything;
// ReadLink returns a link's text as is.
type FS interface {
	fs.ReadFileFS
	fs.ReadDirFS
	fs.ReadLinkFS
	fs.StatFS
}
