// Package fileruntime is a stand-in for a running containerd in unit
// tests of berth's restart path: at each restart it loads the handlers of
// a root's main config and its imports with berth's own parser, as a
// containerd would load them. Tests that need the real daemon use
// critest; this one lets a test kill berth between two steps of a change
// thousands of times a second.
package fileruntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"berth.dev/berth/internal/host/runtimecfg"
)

// Containerd implements configure.Runtime and configure.ConfigLoader.
type Containerd struct {
	// Root is the host root; Config its main config, relative to it
	// ("" is etc/containerd/config.toml).
	Root, Config string
	// Loaded are the handlers it runs (nil: it is down).
	Loaded []string
	// Restarts counts the restarts.
	Restarts int
	// Refuse, when set, says why the configuration on disk would not load
	// (LoadConfig).
	Refuse func(root string) error
	// Gone, when set and true, is a caller that was killed: what it asks
	// does not happen.
	Gone func() bool
}

// ErrGone is the answer to a killed caller.
var ErrGone = errors.New("the caller was killed")

func (c *Containerd) config() string {
	if c.Config == "" {
		return "etc/containerd/config.toml"
	}
	return c.Config
}

// Name is the unit's.
func (c *Containerd) Name() string { return "containerd.service" }

// Restart loads the handlers from the files: runc and every handler the
// merged configuration defines; a configuration that does not parse
// leaves it down.
func (c *Containerd) Restart(context.Context) error {
	if c.Gone != nil && c.Gone() {
		return ErrGone
	}
	c.Restarts++
	l := runtimecfg.LoadContainerd(os.DirFS(c.Root), c.config(), nil)
	if l.Config == nil || len(l.Errors) > 0 {
		c.Loaded = nil
		return fmt.Errorf("containerd failed: %w", errors.Join(l.Errors...))
	}
	c.Loaded = []string{"runc"}
	for _, h := range l.Config.Handlers {
		if h.Name != "runc" {
			c.Loaded = append(c.Loaded, h.Name)
		}
	}
	return nil
}

// Handlers are the loaded handlers; an error when it is down.
func (c *Containerd) Handlers(context.Context) ([]string, error) {
	if c.Loaded == nil {
		return nil, errors.New("not answering")
	}
	return slices.Clone(c.Loaded), nil
}

// Log is empty: the stand-in logs nothing.
func (c *Containerd) Log(context.Context) string { return "" }

// LoadConfig is Refuse's answer.
func (c *Containerd) LoadConfig(context.Context) (string, error) {
	if c.Refuse == nil {
		return "", nil
	}
	return "", c.Refuse(c.Root)
}
