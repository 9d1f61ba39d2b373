package runtimectl

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/host/runtimecfg"
	"berth.dev/berth/platform"
)

// containerdBins are where a host's containerd is looked for, inside the
// root, in order: a distribution that embeds its own (k3s, RKE2) has none
// there, and its configuration is then checked by berth's own parser.
var containerdBins = [...]string{"usr/local/bin/containerd", "usr/bin/containerd", "usr/local/sbin/containerd", "usr/sbin/containerd", "opt/bin/containerd"}

// ContainerdConfig loads a containerd's whole configuration (the main
// file, what it imports, their drop-ins) as its own binary parses it:
// `containerd --config MAIN config dump` exits non-zero, naming the file
// and line when containerd knows them, for a configuration the daemon
// would not start on.
type ContainerdConfig struct {
	// Run runs the binary on the host (nil: it cannot be run).
	Run Runner
	// FS is the host root, for finding the binary and for berth's own
	// parse where the binary cannot be run.
	FS fs.FS
	// Bin is the binary's absolute path on the host ("": the first of
	// containerdBins that exists).
	Bin string
	// Config is the main config, relative to the root.
	Config string
}

// ContainerdConfigFor is the configuration check of layout l on root: the
// host's own containerd is run only on a live root (OnHost runs nothing
// on a fixture or snapshot); nil for a runtime that is not containerd.
func ContainerdConfigFor(root hostfs.Root, run Runner, l platform.Layout) *ContainerdConfig {
	if l.Runtime != platform.Containerd || l.Config == "" {
		return nil
	}
	if !root.Live() {
		run = nil
	}
	return &ContainerdConfig{Run: run, FS: root.FS(), Config: l.Config}
}

// Load returns nil when containerd would load its configuration. note,
// when not empty, says that containerd's own parser could not be run and
// berth's was used instead.
func (c ContainerdConfig) Load(ctx context.Context) (note string, err error) {
	if _, err := fs.Stat(c.FS, c.Config); errors.Is(err, fs.ErrNotExist) {
		return "", nil // containerd runs on its defaults
	}
	bin := c.Bin
	if bin == "" {
		for _, b := range containerdBins {
			if fi, err := fs.Stat(c.FS, b); err == nil && fi.Mode().IsRegular() {
				bin = "/" + b
				break
			}
		}
	}
	switch {
	case c.Run == nil:
		note = "the root is not a running system"
	case bin == "":
		note = "no containerd binary found in " + strings.Join(containerdBins[:], ", ")
	default:
		res, rerr := c.Run(ctx, bin, "--config", "/"+c.Config, "config", "dump")
		if rerr == nil && res.ExitCode == 0 {
			return "", nil
		}
		if rerr == nil {
			return "", fmt.Errorf("%s refuses /%s (with the files it imports): %s", bin, c.Config, dumpError(res.Stderr, res.Stdout))
		}
		note = fmt.Sprintf("%s could not be run (%v)", bin, rerr)
	}
	note = "containerd's own parser was not run (" + note + "): berth checked /" + c.Config + " and its imports with its own parser only"
	l := runtimecfg.LoadContainerd(c.FS, c.Config, nil)
	if len(l.Errors) > 0 {
		return note, errors.Join(l.Errors...)
	}
	return note, nil
}

// dumpError is what config dump said: its error lines (logrus
// "level=fatal msg=..." in 1.7 and 2.x, "containerd: ..." in 1.6), at
// most a few.
func dumpError(stderr, stdout string) string {
	var keep []string
	for line := range strings.Lines(stderr) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if _, msg, ok := strings.Cut(line, "msg="); ok {
			line = strings.Trim(msg, `"`)
		}
		keep = append(keep, line)
	}
	if len(keep) == 0 {
		keep = append(keep, strings.TrimSpace(stdout))
	}
	if len(keep) > 5 {
		keep = keep[len(keep)-5:]
	}
	return strings.Join(keep, "; ")
}

// LoadConfig implements configure.ConfigLoader: nothing is checked when
// r has no configuration check.
func (r Runtime) LoadConfig(ctx context.Context) (string, error) {
	if r.Config == nil {
		return "", nil
	}
	return r.Config.Load(ctx)
}
