package nodeinstall

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/node/configure"
)

// plainRuntime cannot say what answers on its socket.
type plainRuntime struct{ configure.Runtime }

// fakeRunning is a runtime whose socket answers with a name and version.
type fakeRunning struct {
	configure.Runtime
	name, version string
	err           error
}

func (f fakeRunning) Running(context.Context) (string, string, error) {
	return f.name, f.version, f.err
}

// TestUseRunningVersion: the containerd answering on the node's socket
// decides the version the configuration is written for, over the binary
// discovery found on the PATH (the real-node test's machine has Debian's
// containerd 1.6 on the PATH and runs 2.4 for its node).
func TestUseRunningVersion(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rt           configure.Runtime
		binary, want string
	}{
		{"running daemon wins", fakeRunning{name: "containerd", version: "v2.4.2"}, "1.6.20", "2.4.2"},
		{"behind the restart counter", countingRuntime{Runtime: fakeRunning{name: "containerd", version: "v2.4.2"}}, "1.6.20", "2.4.2"},
		{"unknown binary version filled", fakeRunning{name: "containerd", version: "v2.1.9"}, "", "2.1.9"},
		{"same version", fakeRunning{name: "containerd", version: "v1.7.35"}, "1.7.35", "1.7.35"},
		{"socket does not answer", fakeRunning{err: errors.New("connection refused")}, "1.6.20", "1.6.20"},
		{"another runtime on the socket", fakeRunning{name: "cri-o", version: "1.33.0"}, "1.6.20", "1.6.20"},
		{"no version said", fakeRunning{name: "containerd"}, "1.6.20", "1.6.20"},
		{"runtime that cannot say", plainRuntime{}, "1.6.20", "1.6.20"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &facts.Facts{Runtimes: facts.Runtimes{Containerd: &facts.ContainerRuntime{Binary: "/usr/bin/containerd", Version: tc.binary}}}
			in := &Installer{cfg: Config{Log: slog.New(slog.DiscardHandler)}}
			in.useRunningVersion(context.Background(), f, map[string]configure.Runtime{"custom-qemu-none": tc.rt})
			if got := f.Runtimes.Containerd.Version; got != tc.want {
				t.Errorf("containerd version %q, want %q", got, tc.want)
			}
		})
	}
	// No containerd in the facts: nothing to correct, nothing asked.
	in := &Installer{cfg: Config{Log: slog.New(slog.DiscardHandler)}}
	in.useRunningVersion(context.Background(), &facts.Facts{}, map[string]configure.Runtime{"p": fakeRunning{name: "containerd", version: "v2.4.2"}})
}
