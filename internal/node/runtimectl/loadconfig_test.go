package runtimectl

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"berth.dev/berth/internal/host/hostfs"
)

// TestContainerdConfigLoad: the host's containerd is run on its main
// config (config dump), its refusal named; where it cannot be run
// berth's own parse checks the main config and its imports, and says so.
func TestContainerdConfigLoad(t *testing.T) {
	host := fstest.MapFS{
		"etc/containerd/config.toml":     {Data: []byte("version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n")},
		"etc/containerd/conf.d/bad.toml": {Data: []byte("version = 2\n[plugins\n")},
		"usr/bin/containerd":             {Data: []byte("ELF")},
	}
	var ran [][]string
	run := func(code int, stderr string, err error) Runner {
		return func(_ context.Context, argv ...string) (hostfs.CommandResult, error) {
			ran = append(ran, argv)
			return hostfs.CommandResult{ExitCode: code, Stderr: stderr}, err
		}
	}
	for _, tc := range []struct {
		name     string
		run      Runner
		fsys     fstest.MapFS
		err      string
		note     string
		argv     string
		noBinary bool
	}{
		{name: "loads", run: run(0, "", nil), fsys: host, argv: "/usr/bin/containerd --config /etc/containerd/config.toml config dump"},
		// containerd 2.4.2's words for a broken drop-in, and 1.7.35's for
		// an invalid value (which names no file).
		{name: "containerd refuses a drop-in", run: run(1, `time="2026-12-07T19:42:07Z" level=warning msg="Configuration migrated from version 3, use `+"`containerd config migrate`"+` to avoid migration" t="10.716µs"
time="2026-12-07T19:42:07Z" level=error msg="Failure unmarshaling TOML" column=9 error="toml: expected ']' to close table name" file=/etc/containerd/conf.d/bad.toml row=2
containerd: failed to unmarshal TOML at row 2 column 9: toml: expected ']' to close table name
`, nil), fsys: host,
			err: `/usr/bin/containerd refuses /etc/containerd/config.toml (with the files it imports): msg="Failure unmarshaling TOML" column=9 error="toml: expected ']' to close table name" file=/etc/containerd/conf.d/bad.toml row=2; containerd: failed to unmarshal TOML at row 2 column 9: toml: expected ']' to close table name`},
		{name: "containerd refuses a value", run: run(1, "containerd: (3, 3): Can't convert 5(int64) to string\n", nil), fsys: fstest.MapFS{
			"etc/containerd/config.toml": {Data: []byte("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = 5\n")},
			"usr/bin/containerd":         {Data: []byte("ELF")},
		}, err: "/usr/bin/containerd refuses /etc/containerd/config.toml (with the files it imports): containerd: (3, 3): Can't convert 5(int64) to string (in one of /etc/containerd/config.toml)"},
		{name: "cannot run", run: run(0, "", errors.New("exec format error")), fsys: host, err: "etc/containerd/conf.d/bad.toml", note: "could not be run (exec format error)"},
		{name: "not a running system", fsys: host, err: "etc/containerd/conf.d/bad.toml", note: "the root is not a running system"},
		{name: "no config", run: run(1, "never run", nil), fsys: fstest.MapFS{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran = nil
			note, err := ContainerdConfig{Run: tc.run, FS: tc.fsys, Config: "etc/containerd/config.toml"}.Load(context.Background())
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want %q", err, tc.err)
			}
			if (note == "") != (tc.note == "") || !strings.Contains(note, tc.note) {
				t.Errorf("note %q, want %q", note, tc.note)
			}
			if tc.note != "" && !strings.Contains(note, "berth checked /etc/containerd/config.toml and its imports with its own parser only") {
				t.Errorf("note does not say what checked it: %q", note)
			}
			if tc.argv != "" && (len(ran) != 1 || strings.Join(ran[0], " ") != tc.argv) {
				t.Errorf("ran %q, want %q", ran, tc.argv)
			}
		})
	}
}
