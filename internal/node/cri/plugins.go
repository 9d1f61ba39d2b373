package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	introspection "github.com/containerd/containerd/api/services/introspection/v1"
	snapshots "github.com/containerd/containerd/api/services/snapshots/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Plugin is one plugin containerd reports over its introspection service
// (what `ctr plugins ls` prints).
type Plugin struct {
	Type string `json:"type"` // e.g. io.containerd.snapshotter.v1
	ID   string `json:"id"`   // e.g. berth-nydus
	// Err is why the plugin failed to load; empty when it is ok.
	Err string `json:"error,omitempty"`
}

// ErrNoSnapshotter is returned by ProveSnapshotter when containerd has
// no plugin of that name: its config does not define it (yet).
var ErrNoSnapshotter = errors.New("no such snapshotter plugin")

// SnapshotterType is containerd's plugin type of snapshotters, proxy
// plugins of type "snapshot" included.
const SnapshotterType = "io.containerd.snapshotter.v1"

// Plugins asks containerd on socket (its main socket, which serves
// introspection next to CRI) for its plugins: whether a snapshotter
// berth configured is loaded is a question for the daemon, not the file.
func Plugins(ctx context.Context, socket string, timeout time.Duration) ([]Plugin, error) {
	return Endpoint{Path: socket}.Plugins(ctx, timeout)
}

// Plugins asks containerd at e for its plugins.
func (e Endpoint) Plugins(ctx context.Context, timeout time.Duration) ([]Plugin, error) {
	socket := e.String()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := e.client()
	if err != nil {
		return nil, fmt.Errorf("containerd socket %s: %w", socket, err)
	}
	defer conn.Close()
	resp, err := introspection.NewIntrospectionClient(conn).Plugins(ctx, &introspection.PluginsRequest{})
	if err != nil {
		return nil, fmt.Errorf("containerd introspection Plugins over %s: %w", socket, err)
	}
	var out []Plugin
	for _, p := range resp.GetPlugins() {
		x := Plugin{Type: p.GetType(), ID: p.GetID()}
		if e := p.GetInitErr(); e != nil {
			x.Err = e.GetMessage()
			if x.Err == "" {
				x.Err = fmt.Sprintf("init error code %d", e.GetCode())
			}
		}
		out = append(out, x)
	}
	return out, nil
}

// ProveSnapshotter reports whether containerd on socket has the
// snapshotter name loaded and ok (a proxy plugin shows up under the
// snapshotter type once containerd read its config) and whether the
// snapshotter answers through containerd, with an error saying what it
// found otherwise. For a proxy plugin the listing only says that
// containerd read the entry (it dials lazily), and listing snapshots
// reads containerd's own metadata: preparing (and removing) an empty
// active snapshot in a namespace of berth's is the smallest call that
// reaches the snapshotter behind the address.
func ProveSnapshotter(ctx context.Context, socket, name string, timeout time.Duration) error {
	return Endpoint{Path: socket}.ProveSnapshotter(ctx, name, timeout)
}

// ProveSnapshotter proves snapshotter name of containerd at e.
func (e Endpoint) ProveSnapshotter(ctx context.Context, name string, timeout time.Duration) error {
	socket := e.String()
	ps, err := e.Plugins(ctx, timeout)
	if err != nil {
		return err
	}
	found := false
	for _, p := range ps {
		if p.Type == SnapshotterType && p.ID == name {
			if p.Err != "" {
				return fmt.Errorf("containerd on %s: snapshotter %s failed to load: %s", socket, name, p.Err)
			}
			found = true
		}
	}
	if !found {
		return fmt.Errorf("containerd on %s has no snapshotter %s loaded (%w)", socket, name, ErrNoSnapshotter)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := e.client()
	if err != nil {
		return fmt.Errorf("containerd socket %s: %w", socket, err)
	}
	defer conn.Close()
	// A namespace of berth's own, so that no pod's snapshots are touched.
	ctx = metadata.AppendToOutgoingContext(ctx, "containerd-namespace", "berth-probe")
	sc := snapshots.NewSnapshotsClient(conn)
	key := fmt.Sprintf("berth-probe-%d", time.Now().UnixNano())
	if _, err := sc.Prepare(ctx, &snapshots.PrepareSnapshotRequest{Snapshotter: name, Key: key}); err != nil {
		return fmt.Errorf("containerd on %s has snapshotter %s but it does not answer (is its service running?): %w", socket, name, err)
	}
	// NotFound: containerd's garbage collector took the probe first (it
	// holds no lease, and a collection may run between the two calls on a
	// busy node); the snapshotter answered Prepare, which is the proof.
	if _, err := sc.Remove(ctx, &snapshots.RemoveSnapshotRequest{Snapshotter: name, Key: key}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("snapshotter %s on %s: removing probe snapshot %s: %w", name, socket, key, err)
	}
	return nil
}
