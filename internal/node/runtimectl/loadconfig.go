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
			why := dumpError(res.Stderr, res.Stdout)
			// Containerd names the file of a syntax error, not of a value
			// it cannot decode ("(3, 3): Can't convert 5(int64) to
			// string"): the files it read are named then.
			if files := runtimecfg.LoadContainerd(c.FS, c.Config, nil).Files; !strings.Contains(why, ".toml") && len(files) > 0 {
				why += " (in one of /" + strings.Join(files, ", /") + ")"
			}
			return "", fmt.Errorf("%s refuses /%s (with the files it imports): %s", bin, c.Config, why)
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

// dumpError is what config dump said: its error lines, at most a few.
// 1.6 and 1.7 print "containerd: ..."; 2.x logs logrus lines first
// (`level=error msg="Failure unmarshaling TOML" ... file=... row=2`),
// whose fields name the file, and its warnings, which are left out.
func dumpError(stderr, stdout string) string {
	var keep []string
	for line := range strings.Lines(stderr) {
		line = strings.TrimSpace(line)
		if line == "" || strings.Contains(line, "level=warning") || strings.Contains(line, "level=info") || strings.Contains(line, "level=debug") {
			continue
		}
		if i := strings.Index(line, "msg="); i >= 0 && strings.HasPrefix(line, "time=") {
			line = line[i:]
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
