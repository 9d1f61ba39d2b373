// Package buildinfo reports the version berth was built as. The values come
// from the Go toolchain's embedded VCS stamp, or from -ldflags -X overrides
// in release builds.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is what `berth version` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Overridable at link time: -X berth.dev/berth/internal/cli/buildinfo.version=v1.2.3.
// They are only ever set by the linker, never written at run time.
var (
	version = ""
	commit  = ""
)

// Get returns the build information of the running binary.
func Get() Info {
	i := Info{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && i.Commit == "" {
				i.Commit = s.Value
			}
			if s.Key == "vcs.modified" && s.Value == "true" && i.Commit != "" {
				i.Commit += "-dirty"
			}
		}
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}
