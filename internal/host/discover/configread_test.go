package discover

import (
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
)

// deniedRoot is a host root on which reading the files in deny fails with
// EACCES, as it does for a user without the permission (the tests run as
// root, which permission bits do not stop).
type deniedRoot struct {
	hostfs.Root
	deny map[string]bool
}

func (r deniedRoot) FS() hostfs.FS { return deniedFS{r.Root.FS(), r.deny} }

type deniedFS struct {
	hostfs.FS
	deny map[string]bool
}

func (d deniedFS) Open(name string) (fs.File, error) {
	if d.deny[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
	}
	return d.FS.Open(name)
}

func (d deniedFS) ReadFile(name string) ([]byte, error) {
	if d.deny[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
	}
	return d.FS.ReadFile(name)
}

const goodV2 = `version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
`

// TestUnreadableRuntimeConfig: a runtime config berth cannot read is not a
// syntax error. configError stays empty and is unknown with the read
// error as the reason, and so are the facts read from the file; a file
// that does not parse still is a ConfigError.
func TestUnreadableRuntimeConfig(t *testing.T) {
	const main = "etc/containerd/config.toml"
	const crioMain = "etc/crio/crio.conf"
	for _, tc := range []struct {
		name  string
		files map[string]string
		deny  []string
		// field -> the start of its unknown reason; "" not unknown
		want      map[string]string
		wantError string // ConfigError prefix
	}{
		{name: "main permission denied", files: map[string]string{main: goodV2}, deny: []string{main},
			want: map[string]string{
				"runtimes.containerd.configError":   "permission denied: " + main,
				"runtimes.containerd.handlers":      "permission denied: " + main,
				"runtimes.containerd.configVersion": "permission denied: " + main,
				"runtimes.containerd.snapshotters":  "permission denied: " + main,
			}},
		{name: "import permission denied", files: map[string]string{
			main:                              "version = 2\nimports = [\"conf.d/*.toml\"]\n" + goodV2[len("version = 2\n"):],
			"etc/containerd/conf.d/kata.toml": "version = 2\n",
		}, deny: []string{"etc/containerd/conf.d/kata.toml"},
			want: map[string]string{
				"runtimes.containerd.configError":   "permission denied: etc/containerd/conf.d/kata.toml",
				"runtimes.containerd.handlers":      "permission denied: etc/containerd/conf.d/kata.toml",
				"runtimes.containerd.configVersion": "",
			}},
		{name: "directory where the file should be", files: map[string]string{main + "/x": ""},
			want: map[string]string{
				"runtimes.containerd.configError": "unreadable: " + main + ": read " + main + ": is a directory",
				"runtimes.containerd.handlers":    "unreadable: " + main,
			}},
		{name: "syntax error", files: map[string]string{main: "version = 2\n[plugins\n"},
			want: map[string]string{
				"runtimes.containerd.configError":   "",
				"runtimes.containerd.handlers":      facts.ReasonUnparseable + ": " + main + ":2",
				"runtimes.containerd.configVersion": facts.ReasonUnparseable + ": " + main,
			}, wantError: main + ":2"},
		{name: "crio permission denied", files: map[string]string{crioMain: "[crio.runtime]\n", "usr/bin/crio": ""}, deny: []string{crioMain},
			want: map[string]string{
				"runtimes.crio.configError": "permission denied: " + crioMain,
				"runtimes.crio.handlers":    "permission denied: " + crioMain,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var root hostfs.Root = coreRoot(t, tc.files)
			if len(tc.deny) > 0 {
				deny := map[string]bool{}
				for _, d := range tc.deny {
					deny[d] = true
				}
				root = deniedRoot{root, deny}
			}
			f, unknown := runSub(t, root, runRuntimes)
			rt := f.Runtimes.Containerd
			if strings.HasPrefix(tc.name, "crio") {
				rt = f.Runtimes.CRIO
			}
			if rt == nil || !rt.ConfigExists {
				t.Fatalf("runtime not found from its config: %+v", rt)
			}
			if !strings.HasPrefix(rt.ConfigError, tc.wantError) || (tc.wantError == "") != (rt.ConfigError == "") {
				t.Errorf("ConfigError = %q, want %q...", rt.ConfigError, tc.wantError)
			}
			for field, want := range tc.want {
				got, ok := unknown[field]
				switch {
				case want == "" && ok:
					t.Errorf("%s unknown (%s), want known", field, got)
				case want != "" && !strings.HasPrefix(got, want):
					t.Errorf("%s: reason %q, want %q...", field, got, want)
				}
			}
		})
	}
}
