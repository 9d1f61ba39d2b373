// Package cri asks a container runtime over its CRI socket which runtime
// handlers it has loaded: the proof that a configuration berth wrote is
// live, as opposed to merely present on disk.
package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"berth.dev/berth/internal/host/facts"
	"berth.dev/berth/internal/host/hostfs"
	"berth.dev/berth/internal/node/runtimectl"
)

// Handler is a runtime handler as the running runtime reports it:
// facts.Handler, the one type of what a runtime declares for a handler.
// RuntimeType, RuntimePath, Snapshotter, PodAnnotations,
// PrivilegedWithoutHostDevices and Options come from containerd's verbose
// CRI config; they are empty when the runtime only listed the handler in
// runtime_handlers. RuntimeRoot, ConfigPath and Source stay empty: the CRI
// does not report them.
type Handler struct {
	facts.Handler
	// Options is containerd's options table as the runtime reports it
	// (typed, as JSON decodes it); it stands in for facts.Handler's text.
	Options map[string]any `json:"options,omitempty"`
	// Listed is true when the runtime also named it in
	// StatusResponse.runtime_handlers (containerd 2.x, CRI-O).
	Listed bool `json:"listed,omitempty"`
}

// Status is what the runtime said.
type Status struct {
	RuntimeName    string             `json:"runtimeName,omitempty"`
	RuntimeVersion string             `json:"runtimeVersion,omitempty"`
	Handlers       map[string]Handler `json:"handlers"`
}

// Names lists the handlers, sorted.
func (s *Status) Names() []string { return slices.Sorted(maps.Keys(s.Handlers)) }

// Endpoint is where a runtime's gRPC API (CRI, and containerd's own
// services) is reached: Path, a unix socket on this machine, or, with
// Root set, the socket at Path inside the host root Root, resolved as a
// process chrooted into Root would and connected through its handle
// (hostfs.DialUnix). A link in the root therefore never leads berth to a
// runtime outside it: `berth verify --root` asks, and with --sandbox
// starts a pod on, the root's runtime or none.
type Endpoint struct {
	Root, Path string
}

// String is the socket's path on this machine, for messages.
func (e Endpoint) String() string {
	if e.Root == "" {
		return e.Path
	}
	return filepath.Join(e.Root, filepath.FromSlash(strings.TrimPrefix(e.Path, "/")))
}

// client is a gRPC client of e; every connection it makes goes through
// e's dial.
func (e Endpoint) client() (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///localhost", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			if e.Root == "" {
				var d net.Dialer
				return d.DialContext(ctx, "unix", e.Path)
			}
			return hostfs.DialUnix(ctx, e.Root, e.Path)
		}))
}

// Query dials the CRI socket (a path on this machine) and returns the
// runtime's handlers from Version and verbose Status.
func Query(ctx context.Context, socket string, timeout time.Duration) (*Status, error) {
	return Endpoint{Path: socket}.Query(ctx, timeout)
}

// Query asks the runtime at e for its handlers (Version and verbose
// Status).
func (e Endpoint) Query(ctx context.Context, timeout time.Duration) (*Status, error) {
	socket := e.String()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rs, done, err := e.runtimeService()
	if err != nil {
		return nil, err
	}
	defer done()
	st := &Status{Handlers: map[string]Handler{}}
	if v, err := rs.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
		st.RuntimeName, st.RuntimeVersion = v.RuntimeName, v.RuntimeVersion
	} else {
		return nil, fmt.Errorf("CRI Version over %s: %w", socket, err)
	}
	resp, err := rs.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return nil, fmt.Errorf("CRI Status over %s: %w", socket, err)
	}
	if cfg, ok := resp.GetInfo()["config"]; ok {
		hs, err := ParseContainerdConfig([]byte(cfg))
		if err != nil {
			return nil, fmt.Errorf("CRI Status over %s: info[\"config\"]: %w", socket, err)
		}
		maps.Copy(st.Handlers, hs)
	}
	for _, h := range resp.GetRuntimeHandlers() {
		if h.GetName() == "" {
			continue // the default handler
		}
		x := st.Handlers[h.GetName()]
		x.Name, x.Listed = h.GetName(), true
		st.Handlers[h.GetName()] = x
	}
	return st, nil
}

type runtimeJSON struct {
	Type                         string         `json:"runtimeType"`
	Path                         string         `json:"runtimePath"`
	Snapshotter                  string         `json:"snapshotter"`
	PodAnnotations               []string       `json:"PodAnnotations"`
	PrivilegedWithoutHostDevices bool           `json:"privileged_without_host_devices"`
	Options                      map[string]any `json:"options"`
}

// ParseContainerdConfig reads the runtimes out of the CRI config JSON
// containerd puts in Status info["config"] (1.x and 2.x use the same
// field names).
func ParseContainerdConfig(data []byte) (map[string]Handler, error) {
	var doc struct {
		Containerd struct {
			Runtimes map[string]runtimeJSON `json:"runtimes"`
		} `json:"containerd"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	out := map[string]Handler{}
	for name, r := range doc.Containerd.Runtimes {
		out[name] = Handler{Handler: facts.Handler{Name: name, RuntimeType: r.Type, RuntimePath: r.Path, Snapshotter: r.Snapshotter,
			PodAnnotations: r.PodAnnotations, PrivilegedWithoutHostDevices: r.PrivilegedWithoutHostDevices}, Options: r.Options}
	}
	return out, nil
}

// Ask is runtimectl's question over the CRI socket (a path on this
// machine): the handlers, name and version the runtime reports. Each
// question waits at most 5 s: runtimectl asks again until its own limit.
func Ask(socket string) runtimectl.Ask { return Endpoint{Path: socket}.Ask() }

// Ask is Ask of the runtime at e.
func (e Endpoint) Ask() runtimectl.Ask {
	socket := e.String()
	return func(ctx context.Context) (runtimectl.Status, error) {
		st, err := e.Query(ctx, 5*time.Second)
		if err != nil {
			return runtimectl.Status{}, fmt.Errorf("asking over CRI at %s: %w", socket, err)
		}
		return runtimectl.Status{Name: st.RuntimeName, Version: st.RuntimeVersion, Handlers: st.Names()}, nil
	}
}
